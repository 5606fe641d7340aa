"""Media parts are checked, not trusted as labelled. Pure: no I/O, no async.

An ``inlineData`` part is media only when its MIME type is ``image/*`` or ``audio/*``, its
data is valid base64, and its bytes look like what the label says (a known signature of an
image or audio format). Anything else is not media:

* bytes that are UTF-8 text (text, JSON, SVG, or text labelled as an image) become text,
  which the budget counts and cuts like any other output;
* other bytes (a PDF, an unknown binary, invalid base64) are saved and replaced by a text
  reference naming the file;
* real media larger than the per-part cap is saved and replaced by such a reference too.

Every media part that stays inline is saved once as well, so any later layer (a model API
that cannot take it inline) can point at the file instead.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = [
    "DEFAULT_MEDIA_PART_BYTES",
    "MediaVerdict",
    "check_media",
    "decoded_size",
    "describe_bytes",
    "media_suffix",
]

DEFAULT_MEDIA_PART_BYTES: Final = 5 * 2**20
"""The largest media part (decoded bytes) kept inline; larger ones are saved and referenced.

5 MiB: Anthropic's documented per-image limit on Bedrock and Vertex (5 MB) is the
strictest of the model APIs toolbatch maps to; each provider mapping enforces its own.
"""

_IMAGE_SIGNATURES: Final = (
    (0, b"\x89PNG\r\n\x1a\n"),
    (0, b"\xff\xd8\xff"),
    (0, b"GIF87a"),
    (0, b"GIF89a"),
    (0, b"BM"),
    (0, b"II*\x00"),
    (0, b"MM\x00*"),
    (0, b"\x00\x00\x01\x00"),
)
_AUDIO_SIGNATURES: Final = (
    (0, b"ID3"),
    (0, b"OggS"),
    (0, b"fLaC"),
    (0, b"\x1aE\xdf\xa3"),
    (0, b"#!AMR"),
    (0, b".snd"),
)
_SUFFIXES: Final = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/wave": ".wav",
    "audio/mpeg": ".mp3",
    "audio/mp3": ".mp3",
    "audio/ogg": ".ogg",
    "audio/flac": ".flac",
    "audio/aac": ".aac",
    "audio/mp4": ".m4a",
    "audio/webm": ".webm",
    "application/pdf": ".pdf",
}

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


def decoded_size(data: str) -> int:
    """The byte count a base64 string decodes to (padding accounted for)."""
    length = len(data.rstrip())
    padding = len(data.rstrip()) - len(data.rstrip().rstrip("="))
    return max(0, length * 3 // 4 - padding)


def _has_signature(data: bytes, signatures: tuple[tuple[int, bytes], ...]) -> bool:
    return any(data.startswith(magic, offset) for offset, magic in signatures)


def _looks_like(major: str, data: bytes) -> bool:
    if major == "image":
        if _has_signature(data, _IMAGE_SIGNATURES):
            return True
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return True
        return data[4:8] == b"ftyp" and data[8:12] in (b"avif", b"avis", b"heic", b"heix", b"mif1")
    if _has_signature(data, _AUDIO_SIGNATURES):
        return True
    if data[:4] == b"RIFF" and data[8:12] in (b"WAVE", b"AVI "):
        return True
    if data[:4] == b"FORM" and data[8:12] in (b"AIFF", b"AIFC"):
        return True
    if data[4:8] == b"ftyp":
        return True  # MP4 audio (m4a)
    # MPEG audio frame sync (MP3 without ID3, ADTS AAC).
    return len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0


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
    major = mime_type.partition("/")[0].strip().lower()
    if major in ("image", "audio") and _looks_like(major, decoded):
        if len(decoded) > max_bytes:
            return MediaVerdict("oversized", decoded)
        return MediaVerdict("media", decoded)
    text = _as_text(decoded)
    if text is not None:
        if major in ("image", "audio"):
            problem = f"labelled {mime_type} but it is text"
        else:
            problem = f"{mime_type} is not an image or audio type"
        return MediaVerdict("text", decoded, text, problem)
    if major in ("image", "audio"):
        problem = f"labelled {mime_type} but its bytes are not a known {major} format"
    else:
        problem = f"{mime_type} is not an image or audio type"
    return MediaVerdict("binary", decoded, "", problem)


def media_suffix(mime_type: str) -> str:
    """A file suffix for ``mime_type`` (``.bin`` when unknown)."""
    return _SUFFIXES.get(mime_type.strip().lower(), ".bin")


def describe_bytes(count: int) -> str:
    """``count`` bytes for a person: ``512 bytes``, ``4.0 KiB``, ``30.0 MiB``."""
    if count < 1024:
        return f"{count:,} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:,.1f} {unit}"
