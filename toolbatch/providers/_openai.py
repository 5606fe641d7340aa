"""What OpenAI's APIs (Chat Completions and Responses) accept as images.

Sources, read for this module (ecosystem-2 §6):

* image types: PNG, JPEG, WebP and non-animated GIF (the images-vision guide, read through a
  docs mirror ◐).
* per image: 20 MB, and the OpenAPI spec's ``image_url`` ``maxLength`` of 20,971,520
  characters; we apply the stricter one, to the whole ``data:`` URL.
* per request: up to 500 images and 50 MB of image bytes (images-vision guide ◐). We count
  the data URLs, which are a third larger than the bytes, so the sum stays under it.
"""

from __future__ import annotations

from typing import Final

from toolbatch.providers._media import MediaRules

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_URL_CHARS",
    "MAX_REQUEST_IMAGES",
    "MAX_REQUEST_IMAGE_CHARS",
    "data_url",
    "openai_rules",
]

IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
MAX_IMAGE_URL_CHARS: Final = 20_971_520
MAX_REQUEST_IMAGE_CHARS: Final = 50_000_000
MAX_REQUEST_IMAGES: Final = 500


def openai_rules(api: str) -> MediaRules:
    """The image rules of an OpenAI API named ``api`` in references."""
    return MediaRules(
        api=api,
        accepted=IMAGE_TYPES,
        type_names="PNG, JPEG, WebP and GIF",
        max_item_chars=MAX_IMAGE_URL_CHARS,
        max_request_chars=MAX_REQUEST_IMAGE_CHARS,
        max_request_items=MAX_REQUEST_IMAGES,
        data_url=True,
    )


def data_url(mime: str, data: str) -> str:
    """A base64 ``data:`` URL."""
    return f"data:{mime};base64,{data}"
