"""Media parts are checked, not trusted as labelled. Pure: no I/O, no async.

An ``inlineData`` part is media only when its MIME type is a well-formed ``image/*`` or
``audio/*`` type, its data is valid base64, and its bytes are, read as a whole, an image or
audio of the kind the label says (``toolbatch._core.verify_media``: a signature alone is
not enough). Anything else is not media:

* bytes that are UTF-8 text (text, JSON, SVG, or text labelled as an image) become text,
  which the budget counts and cuts like any other output;
* other bytes (a PDF, an unknown binary, invalid base64) are saved and replaced by a text
  reference naming the file;
* real media larger than the per-part cap is saved and replaced by such a reference too.

A ``fileData`` part passes as media only with a well-formed MIME type and a URI of at most
2,048 characters; otherwise both become text, counted like any other.

Every media part that stays inline is saved once as well, so any later layer (a model API
that cannot take it inline) can point at the file instead.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from toolbatch._core import (
    base64_decoded_size,
    bounded_repr,
    describe_bytes,
    file_uri_problem,
    media_type_problem,
    suffix_for_mime,
    verify_media,
)

__all__ = [
    "DEFAULT_MEDIA_PART_BYTES",
    "MediaVerdict",
    "check_media",
    "decoded_size",
    "describe_bytes",
    "file_data_problem",
    "media_suffix",
]

decoded_size = base64_decoded_size
media_suffix = suffix_for_mime

DEFAULT_MEDIA_PART_BYTES: Final = 5 * 2**20
"""The largest media part (decoded bytes) kept inline; larger ones are saved and referenced.

5 MiB: Anthropic's documented per-image limit on Bedrock and Vertex (5 MB) is the
strictest of the model APIs toolbatch maps to; each provider mapping enforces its own.
"""

VerdictKind: TypeAlias = Literal["media", "oversized", "text", "binary"]


@dataclass(frozen=True, slots=True)
class MediaVerdict:
    """What an ``inlineData`` part really is.

    Attributes:
        kind: ``media`` (keep inline), ``oversized`` (real media over the cap: save and
            reference), ``text`` (send ``text`` instead), ``binary`` (save and reference).
        data: the decoded bytes (``None`` when the base64 was invalid).
        text: for ``text``, the decoded text; for invalid base64, the raw data as text.
        problem: for ``binary`` and ``text``, why the part is not media (for the reference).
    """

    kind: VerdictKind
    data: bytes | None
    text: str = ""
    problem: str = ""


def _as_text(data: bytes) -> str | None:
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_media(
    mime_type: str, data: str, *, max_bytes: int = DEFAULT_MEDIA_PART_BYTES
) -> MediaVerdict:
    """Classify one ``inlineData`` part (see the module docstring)."""
    try:
        decoded = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return MediaVerdict("text", None, data, "its data is not valid base64")
    problem = media_type_problem(mime_type)
    major = mime_type.partition("/")[0].strip().lower()
    if problem is None and major in ("image", "audio"):
        found = verify_media(decoded)
        if found is not None and found.mime_type.startswith(major):
            if len(decoded) > max_bytes:
                return MediaVerdict("oversized", decoded)
            return MediaVerdict("media", decoded)
    label = bounded_repr(mime_type)
    text = _as_text(decoded)
    if problem is None:
        if major not in ("image", "audio"):
            problem = f"{label} is not an image or audio type"
        elif text is not None:
            problem = f"labelled {label} but it is text"
        else:
            problem = f"labelled {label} but its bytes are not a whole {major} of a known format"
    if text is not None:
        return MediaVerdict("text", decoded, text, problem)
    return MediaVerdict("binary", decoded, "", problem)


def file_data_problem(mime_type: str, file_uri: str) -> str | None:
    """Why a ``fileData`` part cannot pass as media, or ``None`` when it can."""
    return media_type_problem(mime_type) or file_uri_problem(file_uri)
