"""Which media a model API may receive, and the text reference that replaces the rest.

Pure: sizes come from the base64 text, pixel sizes from the image's first bytes; nothing
is written. A part the API cannot take becomes ``[<type>, <size>, not sent: <why>; saved
at <file>]``, naming where the finalizer saved it (``InlineData.persisted_file``).

Each request's media are admitted in order, earlier tool turns first, so what a model
already received keeps its form in every later request, and when a request limit is
reached it is the later media that become references.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    TextPart,
    Turn,
    base64_decoded_size,
    describe_bytes,
    file_uri_problem,
    jpeg_dimensions,
    media_type_problem,
    sniff_media,
)
from toolbatch.providers._batch import MediaPart, Source, parts_of

__all__ = [
    "SNIFFED_IMAGE_TYPES",
    "Admitted",
    "MediaAllowance",
    "MediaRules",
    "decoded_size",
    "image_size",
    "inline_reference",
    "media_type",
    "sniff",
]

_TYPE_ALIASES: Final = {"image/jpg": "image/jpeg"}
_NAMES: Final = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
SNIFFED_IMAGE_TYPES: Final = frozenset(_NAMES)
"""Image types whose bytes are checked: a mislabelled image is sent as what it is."""
_JPEG_HEAD_CHARS: Final = 87_384
"""Base64 characters of 64 KiB: where a JPEG's frame header nearly always is."""
_SIZE_CACHE_ENTRIES: Final = 1024
_size_cache: dict[tuple[str, int, int], tuple[int, int] | None] = {}


@dataclass(frozen=True, slots=True)
class Admitted:
    """A media part is sent inline, as ``mime`` (its bytes' real type, when they differ)."""

    mime: str


@dataclass(frozen=True, slots=True)
class MediaRules:
    """What one API accepts in a request. Sizes count the encoded characters sent.

    Attributes:
        api: the API's name in references (``the Anthropic API``).
        accepted: the media types sent inline, lower case.
        type_names: how ``accepted`` images are named in a reference (``JPEG, PNG``).
        max_item_chars: the largest one part may be.
        max_request_chars: the most all media of a request may hold.
        max_request_items: the most media parts a request may hold.
        data_url: sizes count the ``data:<type>;base64,`` URL (OpenAI), not bare base64.
        file_uris: ``fileData`` parts are sent as they are (Gemini), not referenced.
        max_side_px: the largest image side the API takes, when it has one.
        many_items: past this many images, each image must have sides of at most
            ``many_items_max_side_px``.
        many_items_max_side_px: see ``many_items``.
    """

    api: str
    accepted: frozenset[str]
    type_names: str
    max_item_chars: int
    max_request_chars: int
    max_request_items: int
    data_url: bool = False
    file_uris: bool = False
    max_side_px: int | None = None
    many_items: int | None = None
    many_items_max_side_px: int = 0


def media_type(mime: str) -> str:
    """``mime`` without parameters, in lower case, ``image/jpg`` read as ``image/jpeg``."""
    base = mime.split(";", 1)[0].strip().lower()
    return _TYPE_ALIASES.get(base, base)


decoded_size = base64_decoded_size
_human = describe_bytes


def inline_reference(inline: InlineData, reason: str) -> str:
    """The text that stands for inline media that is not sent (its type named, bounded)."""
    where = (
        f"saved at {inline.persisted_file}"
        if inline.persisted_file is not None
        else "no saved copy is available"
    )
    mime = inline.mime_type if media_type_problem(inline.mime_type) is None else "media"
    return f"[{mime}, {_human(decoded_size(inline.data))}, not sent: {reason}; {where}]"


def _decode_head(data: str, chars: int) -> bytes:
    head = data if chars >= len(data) else data[: chars - chars % 4]
    try:
        return base64.b64decode(head)
    except (binascii.Error, ValueError):
        return b""


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        b0, b1, b2, b3 = head[21:25]
        return 1 + (b0 | (b1 & 0x3F) << 8), 1 + (b1 >> 6 | b2 << 2 | (b3 & 0x0F) << 10)
    if chunk == b"VP8X" and len(head) >= 30:
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    return None


def sniff(data: str) -> str | None:
    """The image type the bytes claim to be (PNG, JPEG, GIF or WebP), or ``None``.

    The finalizer has checked each inline part as a whole (``toolbatch._core.verify_media``);
    this names what it is, from the one signature table.
    """
    found = sniff_media(_decode_head(data, 16))
    return found.mime_type if found is not None and found.mime_type in _NAMES else None


def _measure(mime: str, data: str) -> tuple[int, int] | None:
    head = _decode_head(data, 64)
    if mime == "image/png" and head[12:16] == b"IHDR":
        if len(head) >= 24:
            width, height = struct.unpack(">II", head[16:24])
            return width, height
        return None
    if mime == "image/gif" and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if mime == "image/webp":
        return _webp_size(head)
    if mime == "image/jpeg":
        found = jpeg_dimensions(_decode_head(data, _JPEG_HEAD_CHARS))
        if found is None and len(data) > _JPEG_HEAD_CHARS:
            found = jpeg_dimensions(_decode_head(data, len(data)))
        return found
    return None


def image_size(mime: str, data: str) -> tuple[int, int] | None:
    """Width and height of a base64 image ``sniff`` found to be ``mime``, or ``None``.

    Remembered for recent images: a client maps its whole history for every request.
    """
    key = (mime, len(data), hash(data))
    if key in _size_cache:
        return _size_cache[key]
    found = _measure(mime, data)
    if len(_size_cache) >= _SIZE_CACHE_ENTRIES:
        del _size_cache[next(iter(_size_cache))]
    _size_cache[key] = found
    return found


class MediaAllowance:
    """Admits one request's media in order against one API's rules."""

    __slots__ = ("_all_small", "_chars", "_items", "_rules")

    def __init__(self, rules: MediaRules) -> None:
        self._rules = rules
        self._chars = 0
        self._items = 0
        self._all_small = True

    def admit_earlier(self, turns: Sequence[Source]) -> None:
        """Count the media of earlier tool turns of the same request, oldest first.

        Raises:
            TypeError: ``turns`` is one turn's parts rather than a sequence of turns.
        """
        if isinstance(turns, Turn):
            raise TypeError("earlier takes a sequence of turns, not one turn; wrap it: [turn]")
        for turn in turns:
            if isinstance(turn, TextPart | FunctionResponsePart | InlineDataPart | FileDataPart):
                raise TypeError(
                    "earlier takes a sequence of turns (each a Turn or a list of parts), "
                    "not one turn's parts; wrap it: earlier=[parts]"
                )
            for part in parts_of(turn):
                if isinstance(part, InlineDataPart | FileDataPart):
                    self.admit(part)

    def admit(self, part: MediaPart) -> Admitted | str:
        """How ``part`` is sent (``Admitted``), or the text reference to send instead."""
        rules = self._rules
        if isinstance(part, FileDataPart):
            data = part.file_data
            problem = media_type_problem(data.mime_type) or file_uri_problem(data.file_uri)
            if problem is not None:
                return f"[a file reference, not sent: {problem}]"
            if rules.file_uris:
                return Admitted(data.mime_type)
            return (
                f"[{data.mime_type} at {data.file_uri}, not sent: {rules.api} takes no "
                f"file references in tool results]"
            )
        inline = part.inline_data
        problem = media_type_problem(inline.mime_type)
        if problem is not None:
            return inline_reference(inline, problem)
        mime = media_type(inline.mime_type)
        if mime in SNIFFED_IMAGE_TYPES:
            actual = sniff(inline.data)
            if actual is None:
                # The API would fail to decode it, and refuse every later request too.
                return inline_reference(inline, f"the data is not a {_NAMES[mime]} image")
            mime = actual
        if mime not in rules.accepted:
            return inline_reference(inline, self._type_reason(mime))
        size = len(inline.data) + (len(f"data:{mime};base64,") if rules.data_url else 0)
        if size > rules.max_item_chars:
            return inline_reference(
                inline,
                f"over the {_human(rules.max_item_chars)} per-image limit of {rules.api}"
                if rules.max_item_chars < rules.max_request_chars
                else f"over the {_human(rules.max_request_chars)} of media {rules.api} "
                f"takes per request",
            )
        small = True
        if rules.max_side_px is not None and mime in SNIFFED_IMAGE_TYPES:
            found = image_size(mime, inline.data)
            if found is not None and max(found) > rules.max_side_px:
                return inline_reference(
                    inline,
                    f"{found[0]}×{found[1]} px is over the {rules.max_side_px} px per side "
                    f"{rules.api} takes",
                )
            small = found is not None and max(found) <= rules.many_items_max_side_px
        if self._items >= rules.max_request_items:
            return inline_reference(
                inline,
                f"the request already holds {self._items} images, the most {rules.api} takes",
            )
        if (
            rules.many_items is not None
            and self._items >= rules.many_items
            and not (self._all_small and small)
        ):
            return inline_reference(
                inline,
                f"the request already holds {self._items} images, and {rules.api} takes more "
                f"only if every image is at most {rules.many_items_max_side_px} px a side",
            )
        if self._chars + size > rules.max_request_chars:
            return inline_reference(
                inline,
                f"the request's media would pass the {_human(rules.max_request_chars)} "
                f"{rules.api} takes per request",
            )
        self._items += 1
        self._chars += size
        self._all_small = self._all_small and small
        return Admitted(mime)

    def _type_reason(self, mime: str) -> str:
        rules = self._rules
        if mime.startswith("image/"):
            return f"{rules.api} takes only {rules.type_names} images"
        if mime.startswith("audio/") and not any(
            accepted.startswith("audio/") for accepted in rules.accepted
        ):
            return f"{rules.api} takes no audio in tool results"
        return f"{rules.api} takes no {mime} in tool results"
