"""Anthropic Messages: tool calls from a reply, a turn as one user message, tools.

``tool_results`` gives one ``user`` message whose content is one ``tool_result`` block per
function response, in call order (``tool_use_id``, ``content`` of text and image blocks,
``is_error`` for error responses), then the batch's text blocks: the API wants the results
first in the message right after the ``tool_use`` message. Media it cannot take (audio,
other types, images over its limits, ``fileData``) become text references.

Limits (ecosystem-2 §6, from platform.claude.com build-with-claude/vision and api/overview):

* image types: JPEG, PNG, GIF, WebP (also the SDK's ``Base64ImageSourceParam.media_type``).
* per image: the docs give 10 MB of base64 on the API and 5 MB on Bedrock and Vertex; we
  use 5 MiB of base64, the smallest number read the strictest way, so one rule holds
  whichever of them ``ANTHROPIC_BASE_URL`` reaches.
* at most 8000 px a side; when a request holds more than 20 images, at most 2000 px a side
  (images inside ``tool_result`` count).
* per request: 100 images on 200k-context models (600 on others; we use 100), and 32 MB
  in all (413 ``request_too_large``): media get 28 MB, 4 MB stay for text (a 1M-token
  context holds about 4 MB of text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from toolbatch._core import InlineDataPart, TextPart, ToolCall, ToolDeclaration
from toolbatch.providers._batch import (
    HasDeclarations,
    MediaPart,
    Source,
    declarations_of,
    group,
    response_text,
)
from toolbatch.providers._calls import as_list, make_call, plain, reply_shape_error, with_ids
from toolbatch.providers._media import MediaAllowance, MediaRules

__all__ = [
    "tool_calls",
    "tool_definitions",
    "tool_results",
]

IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_IMAGE_BASE64_CHARS: Final = 5 * 1024 * 1024
MAX_IMAGE_SIDE_PX: Final = 8000
MANY_IMAGES: Final = 20
MANY_IMAGES_MAX_SIDE_PX: Final = 2000
MAX_REQUEST_IMAGES: Final = 100
MAX_REQUEST_MEDIA_CHARS: Final = 28_000_000

MEDIA_RULES: Final = MediaRules(
    api="the Anthropic API",
    accepted=IMAGE_TYPES,
    type_names="JPEG, PNG, GIF and WebP",
    max_item_chars=MAX_IMAGE_BASE64_CHARS,
    max_request_chars=MAX_REQUEST_MEDIA_CHARS,
    max_request_items=MAX_REQUEST_IMAGES,
    max_side_px=MAX_IMAGE_SIDE_PX,
    many_items=MANY_IMAGES,
    many_items_max_side_px=MANY_IMAGES_MAX_SIDE_PX,
)
"""Images only, inside ``tool_result``; see the limits above."""


def tool_calls(reply: object) -> list[ToolCall]:
    """The ``tool_use`` blocks of a message's ``content``, in order.

    Takes the SDK's ``Message``, its dict, or the ``content`` list itself. Server tools
    (``server_tool_use``) run at Anthropic and are not returned. A call whose ``input`` is
    not an object comes back with ``invalid`` set; no call is dropped.

    Raises:
        ReplyShapeError: (a ValueError) ``reply`` is not a message or a list of content blocks.
    """
    body = plain(reply)
    if isinstance(body, Mapping) and "content" in body:
        blocks = as_list(body["content"])
    elif isinstance(body, list):
        blocks = body
    else:
        raise reply_shape_error("an Anthropic Messages", "a message with 'content'", body)
    calls: list[ToolCall] = []
    for block in blocks:
        entry = plain(block)
        if isinstance(entry, Mapping) and entry.get("type") == "tool_use":
            calls.append(
                make_call(entry.get("id"), entry.get("name"), entry.get("input"), len(calls))
            )
    return with_ids(calls)


def _image(part: InlineDataPart, mime: str) -> dict[str, Any]:
    source = {
        "type": "base64",
        "media_type": mime,
        "data": part.inline_data.data,
    }
    return {"type": "image", "source": source}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_results(turn: Source, /, *, earlier: Sequence[Source] = ()) -> list[dict[str, Any]]:
    """A finalized turn (or a tool message's parts) as one user message (or none if empty).

    Args:
        turn: the turn, or the parts of a recorded tool message.
        earlier: the tool turns already in the same request, oldest first: their images
            count against the request's limits before this turn's.
    """
    batch = group(turn)
    allowance = MediaAllowance(MEDIA_RULES)
    allowance.admit_earlier(earlier)
    blocks: list[dict[str, Any]] = []
    for call in batch.calls:
        text = response_text(call.response)
        content: list[dict[str, Any]] = [_text(text)] if text else []
        for media in call.media:
            decision = allowance.admit(media)
            if isinstance(decision, str):
                content.append(_text(decision))
            elif isinstance(media, InlineDataPart):
                content.append(_image(media, decision.mime))
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.call_id}
        if content:  # the API refuses empty text blocks; a result may have no content
            block["content"] = content
        if call.is_error:
            block["is_error"] = True
        blocks.append(block)
    for extra in batch.extras:
        blocks.extend(_extra(extra, allowance))
    return [{"role": "user", "content": blocks}] if blocks else []


def _extra(part: TextPart | MediaPart, allowance: MediaAllowance) -> list[dict[str, Any]]:
    if isinstance(part, TextPart):
        return [_text(part.text)] if part.text else []
    decision = allowance.admit(part)
    if isinstance(decision, str):
        return [_text(decision)]
    assert isinstance(part, InlineDataPart)  # only Gemini takes fileData as it is
    return [_image(part, decision.mime)]


def tool_definitions(tools: HasDeclarations | Iterable[ToolDeclaration]) -> list[dict[str, Any]]:
    """The declarations of a registry (or the declarations given) as Messages ``tools``."""
    definitions: list[dict[str, Any]] = []
    for declaration in declarations_of(tools):
        definition: dict[str, Any] = {
            "name": declaration.name,
            "input_schema": declaration.input_schema,
        }
        if declaration.description:
            definition["description"] = declaration.description
        definitions.append(definition)
    return definitions
