"""Media facts from bytes and base64: the one home of every media rule. Pure, no I/O.

* **One signature table** (``sniff_media``): what a blob claims to be from its first bytes
  (images, audio, PDF, archives), for naming files and describing binary output.
* **One structural check** (``verify_media``): whether the bytes really are the format they
  claim, read to the end. A signature is 2 to 8 bytes, so text that starts with ``BM`` or
  ``ID3`` is not an image or audio; only bytes that parse as a whole are. Images are the
  four formats every model API takes (PNG, JPEG, GIF, WebP), walked chunk by chunk (PNG
  chunk CRCs included) to their end marker; audio is parsed by ``mutagen`` (pure Python,
  well kept), which must find its stream parameters; a WAV's RIFF size must be its length,
  and other audio must not end in 64 KiB of text (mutagen reads only the headers).
* **One base64 size rule** (``base64_decoded_size``) and **one size formatter**
  (``describe_bytes``).
* **The bounds on media strings** (``media_type_problem``, ``file_uri_problem``): a MIME
  type must be a well-formed ``type/subtype`` of reasonable length, a file URI must be
  short, so neither can carry uncounted text past the budget.

Why not Pillow for images: it is a 7 MB binary wheel, and its ``verify()`` checks no more
than the chunk CRCs walked here (for JPEG, GIF and WebP it only parses the header).
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_FILE_URI_CHARS",
    "MAX_MEDIA_TYPE_CHARS",
    "MediaType",
    "base64_decoded_size",
    "bounded_repr",
    "describe_bytes",
    "file_uri_problem",
    "jpeg_dimensions",
    "media_type_problem",
    "sniff_media",
    "suffix_for_mime",
    "verify_media",
]

MAX_MEDIA_TYPE_CHARS: Final = 255
"""The longest MIME type (parameters included) a media part may carry (RFC 6838: 127 + 127)."""
MAX_FILE_URI_CHARS: Final = 2048
"""The longest ``fileUri`` a ``fileData`` part may carry; a longer one is text, and counted."""
TRAILING_SLACK_BYTES: Final = 1024
"""Bytes tolerated after an image's end marker (some encoders pad); more is not that image."""

_TOKEN: Final = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE: Final = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:\s*;\s*[A-Za-z0-9!#$&^_.+-]+=(?:[A-Za-z0-9!#$&^_.+-]+|\"[^\"\\]*\"))*"
)


@dataclass(frozen=True, slots=True)
class MediaType:
    """A recognised kind of binary data.

    Attributes:
        mime_type: its MIME type, e.g. ``image/png``.
        suffix: the file name suffix an artifact of it gets, e.g. ``.png``.
        description: a few words for the model, e.g. ``PNG image``.
    """

    mime_type: str
    suffix: str
    description: str

    @property
    def is_image(self) -> bool:
        """Whether model APIs take it as an inline image."""
        return self.mime_type.startswith("image/")

    @property
    def is_audio(self) -> bool:
        """Whether it is audio."""
        return self.mime_type.startswith("audio/")


PNG: Final = MediaType("image/png", ".png", "PNG image")
JPEG: Final = MediaType("image/jpeg", ".jpg", "JPEG image")
GIF: Final = MediaType("image/gif", ".gif", "GIF image")
WEBP: Final = MediaType("image/webp", ".webp", "WebP image")
_BMP: Final = MediaType("image/bmp", ".bmp", "BMP image")
_TIFF: Final = MediaType("image/tiff", ".tiff", "TIFF image")
_MP3: Final = MediaType("audio/mpeg", ".mp3", "MP3 audio")
_WAV: Final = MediaType("audio/wav", ".wav", "WAV audio")
_OGG: Final = MediaType("audio/ogg", ".ogg", "Ogg audio")
_FLAC: Final = MediaType("audio/flac", ".flac", "FLAC audio")
_AIFF: Final = MediaType("audio/aiff", ".aiff", "AIFF audio")
_AAC: Final = MediaType("audio/aac", ".aac", "AAC audio")
_M4A: Final = MediaType("audio/mp4", ".m4a", "MP4 audio")
_PDF: Final = MediaType("application/pdf", ".pdf", "PDF document")
_GZIP: Final = MediaType("application/gzip", ".gz", "gzip archive")
_ZIP: Final = MediaType("application/zip", ".zip", "zip archive")

_MAGIC: Final[tuple[tuple[bytes, MediaType], ...]] = (
    (b"\x89PNG\r\n\x1a\n", PNG),
    (b"\xff\xd8\xff", JPEG),
    (b"GIF87a", GIF),
    (b"GIF89a", GIF),
    (b"%PDF-", _PDF),
    (b"\x1f\x8b", _GZIP),
    (b"PK\x03\x04", _ZIP),
    (b"ID3", _MP3),
    (b"OggS", _OGG),
    (b"fLaC", _FLAC),
    (b"II*\x00", _TIFF),
    (b"MM\x00*", _TIFF),
    (b"BM", _BMP),
)
"""The one signature table: what bytes claim to be (``verify_media`` checks the claim)."""
_RIFF_FORMS: Final = {b"WEBP": WEBP, b"WAVE": _WAV}
_SUFFIXES: Final = {
    media.mime_type: media.suffix
    for media in (
        PNG,
        JPEG,
        GIF,
        WEBP,
        _BMP,
        _TIFF,
        _MP3,
        _WAV,
        _OGG,
        _FLAC,
        _AIFF,
        _AAC,
        _M4A,
        _PDF,
        _GZIP,
        _ZIP,
    )
} | {
    "image/jpg": ".jpg",
    "audio/mp3": ".mp3",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/webm": ".webm",
}


def sniff_media(data: bytes) -> MediaType | None:
    """What ``data`` claims to be from its first bytes, or ``None`` when it is not one we know.

    A claim, not a check: ``verify_media`` reads the whole.
    """
    for magic, media in _MAGIC:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF":
        return _RIFF_FORMS.get(data[8:12])
    return None


def suffix_for_mime(mime_type: str | None) -> str:
    """The artifact suffix for ``mime_type`` (``.bin`` when it is not one we know)."""
    return _SUFFIXES.get((mime_type or "").split(";", 1)[0].strip().lower(), ".bin")


def base64_decoded_size(data: str) -> int:
    """How many bytes the base64 text ``data`` decodes to, padding and whitespace aside.

    4,033 bytes are 5,380 base64 characters, two of them ``=``: ``len * 3 // 4`` alone
    would say 4,035.
    """
    if "\n" in data or "\r" in data or " " in data:
        data = "".join(data.split())  # MIME-style line breaks
    padding = len(data) - len(data.rstrip("="))
    return max(0, len(data) * 3 // 4 - min(padding, 2))


def describe_bytes(count: int) -> str:
    """``count`` bytes for a person: ``512 bytes``, ``4.0 KiB``, ``30.0 MiB``."""
    if count < 1024:
        return f"{count:,} bytes"
    value = count / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} GiB"


def bounded_repr(value: str, limit: int = 60) -> str:
    """``repr(value)``, or its first ``limit`` characters and the total when it is longer."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def media_type_problem(mime_type: str) -> str | None:
    """Why ``mime_type`` cannot label a media part, or ``None`` when it is a fine one."""
    if len(mime_type) > MAX_MEDIA_TYPE_CHARS:
        return (
            f"its MIME type {bounded_repr(mime_type)} is longer than the "
            f"{MAX_MEDIA_TYPE_CHARS} characters a MIME type may have"
        )
    if _MEDIA_TYPE.fullmatch(mime_type) is None:
        return f"its MIME type {bounded_repr(mime_type)} is not a well-formed type/subtype"
    return None


def file_uri_problem(file_uri: str) -> str | None:
    """Why ``file_uri`` cannot be a media reference, or ``None`` when it is a fine one."""
    if len(file_uri) > MAX_FILE_URI_CHARS:
        return (
            f"its URI is {len(file_uri):,} characters, over the {MAX_FILE_URI_CHARS:,} a "
            f"file reference may have"
        )
    if not file_uri or any(char.isspace() or ord(char) < 0x20 for char in file_uri):
        return f"its URI {bounded_repr(file_uri)} is empty or holds whitespace"
    return None


# -- the structural check -----------------------------------------------------------------


class _Malformed(Exception):
    """The bytes do not parse as the format they claim."""


def _fits(data: bytes, end: int) -> None:
    if end > len(data):
        raise _Malformed


def _png_end(data: bytes) -> int:
    index = 8
    first = True
    while True:
        _fits(data, index + 12)
        length = int.from_bytes(data[index : index + 4], "big")
        kind = data[index + 4 : index + 8]
        end = index + 12 + length
        _fits(data, end)
        if first and (kind != b"IHDR" or length != 13):
            raise _Malformed
        first = False
        body = data[index + 4 : index + 8 + length]
        if zlib.crc32(body) != int.from_bytes(data[end - 4 : end], "big"):
            raise _Malformed
        if kind == b"IEND":
            return end
        index = end


def _sub_blocks_end(data: bytes, index: int) -> int:
    while True:
        _fits(data, index + 1)
        size = data[index]
        index += 1 + size
        if size == 0:
            return index


def _gif_end(data: bytes) -> int:
    _fits(data, 13)
    packed = data[10]
    index = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    images = 0
    while True:
        if index == len(data) and images:
            return index  # the trailer byte is missing, as some encoders leave it: whole
        _fits(data, index + 1)
        block = data[index]
        if block == 0x3B:  # trailer
            if images == 0:
                raise _Malformed
            return index + 1
        if block == 0x21:  # extension: label, then sub-blocks
            index = _sub_blocks_end(data, index + 2)
        elif block == 0x2C:  # image descriptor, local colour table, LZW size, data
            _fits(data, index + 10)
            packed = data[index + 9]
            index += 10 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
            index = _sub_blocks_end(data, index + 1)
            images += 1
        else:
            raise _Malformed


_JPEG_SOF: Final = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def _jpeg_segments(data: bytes) -> Iterator[tuple[int, int]]:
    """``(marker, index)`` of each JPEG segment after SOI, the one walker of JPEG structure.

    ``index`` is where the segment's ``FF`` marker byte is; fill bytes and the markers that
    carry no length are stepped over, and after a start of scan (``FFDA``) the
    entropy-coded data up to the next real marker. The walk ends after the end of image
    (``FFD9``, yielded); bytes that break the structure or end early raise ``_Malformed``.
    """
    index = 2
    while True:
        _fits(data, index + 2)
        if data[index] != 0xFF:
            raise _Malformed
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
            index += 2
            continue
        yield marker, index
        if marker == 0xD9:  # end of image
            return
        _fits(data, index + 4)
        length = (data[index + 2] << 8) | data[index + 3]
        if length < 2:
            raise _Malformed
        index += 2 + length
        _fits(data, index)
        if marker == 0xDA:  # entropy-coded data runs to the next marker that is not FF00/RST
            while True:
                index = data.find(b"\xff", index)
                if index < 0 or index + 1 >= len(data):
                    raise _Malformed
                following = data[index + 1]
                if following == 0 or 0xD0 <= following <= 0xD7:
                    index += 2
                    continue
                break


def _jpeg_end(data: bytes) -> int:
    frame = scan = False
    for marker, index in _jpeg_segments(data):
        if marker == 0xD9:
            if not (frame and scan):
                raise _Malformed
            return index + 2
        frame = frame or marker in _JPEG_SOF
        if marker == 0xDA:
            if not frame:
                raise _Malformed
            scan = True
    raise _Malformed  # pragma: no cover  (the walk ends at FFD9 or raises)


def jpeg_dimensions(head: bytes) -> tuple[int, int] | None:
    """Width and height from the first frame header of a JPEG's ``head`` bytes, or ``None``
    (no frame header before the scan data, or ``head`` ends before it)."""
    try:
        for marker, index in _jpeg_segments(head):
            if marker in (0xD9, 0xDA):
                return None
            if marker in _JPEG_SOF:
                if index + 9 > len(head):
                    return None
                return (head[index + 7] << 8 | head[index + 8]), (
                    head[index + 5] << 8 | head[index + 6]
                )
    except _Malformed:
        return None
    return None


def _webp_end(data: bytes) -> int:
    _fits(data, 20)
    end = 8 + int.from_bytes(data[4:8], "little")
    _fits(data, end)
    index = 12
    if data[12:16] not in (b"VP8 ", b"VP8L", b"VP8X"):
        raise _Malformed
    while index < end:
        _fits(data, index + 8)
        size = int.from_bytes(data[index + 4 : index + 8], "little")
        index += 8 + size + (size & 1)
    if index not in (end, end + 1):
        raise _Malformed
    return end


_IMAGE_ENDS: Final = {PNG: _png_end, GIF: _gif_end, JPEG: _jpeg_end, WEBP: _webp_end}


def _verified_image(data: bytes, claimed: MediaType) -> MediaType | None:
    walk = _IMAGE_ENDS.get(claimed)
    if walk is None:
        return None
    try:
        end = walk(data)
    except (_Malformed, IndexError):
        return None
    return claimed if len(data) - end <= TRAILING_SLACK_BYTES else None


def _verified_audio(data: bytes) -> MediaType | None:
    import mutagen  # imported on first use: most batches hold no audio

    try:
        found = mutagen.File(io.BytesIO(data))
    except Exception:  # mutagen raises many kinds (MutagenError, struct.error, ...) on junk
        return None
    if found is None:
        return None
    info = found.info
    if not (getattr(info, "length", 0) or 0) > 0 or not (getattr(info, "sample_rate", 0) or 0) > 0:
        return None
    kind = type(found).__name__
    if _ends_in_text(data):
        return None  # a real header, then text: compressed audio is never 64 KiB of UTF-8
    if kind == "WAVE":
        size = int.from_bytes(data[4:8], "little") + 8
        return _WAV if size in (len(data), len(data) - 1) else None
    return {
        "MP3": _MP3,
        "EasyMP3": _MP3,
        "FLAC": _FLAC,
        "AIFF": _AIFF,
        "AAC": _AAC,
        "MP4": _M4A,
        "EasyMP4": _M4A,
    }.get(kind, _OGG if kind.startswith("Ogg") else None)


_TEXT_WINDOW_BYTES: Final = 64 * 2**10
_CONTROL: Final = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _ends_in_text(data: bytes) -> bool:
    """Whether the last 64 KiB of ``data`` are text: UTF-8 without control characters.

    mutagen reads audio at its headers, so text appended to a real stream would pass; no
    compressed audio holds 64 KiB of valid UTF-8 (and PCM holds control bytes)."""
    if len(data) < 2 * _TEXT_WINDOW_BYTES:
        return False
    tail = data[-_TEXT_WINDOW_BYTES:]
    start = 0
    while start < 4 and tail[start] & 0xC0 == 0x80:  # a character cut by the window
        start += 1
    try:
        tail[start:].decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(tail) is None


def verify_media(data: bytes) -> MediaType | None:
    """The image or audio format ``data`` really is, read as a whole, or ``None``.

    An image is one of PNG, JPEG, GIF and WebP whose structure holds to its end marker
    (at most ``TRAILING_SLACK_BYTES`` after it); audio is what ``mutagen`` parses with a
    length and a sample rate. Text never passes: valid UTF-8 holds no ``0xFF`` byte, which
    every MPEG frame and JPEG marker needs, and no valid chunk structure with CRCs.
    """
    claimed = sniff_media(data)
    if claimed is not None and claimed.is_image:
        return _verified_image(data, claimed)
    return _verified_audio(data)
