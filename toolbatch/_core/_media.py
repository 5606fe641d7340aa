"""Media facts from bytes and base64: what a blob is, and how many bytes base64 holds.

Pure functions, no I/O. ``sniff_media`` knows the magic numbers of the formats a tool is
likely to hand back (images, PDF, archives); anything else is ``None``, plain binary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["MediaType", "base64_decoded_size", "sniff_media", "suffix_for_mime"]


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


_PNG: Final = MediaType("image/png", ".png", "PNG image")
_JPEG: Final = MediaType("image/jpeg", ".jpg", "JPEG image")
_GIF: Final = MediaType("image/gif", ".gif", "GIF image")
_WEBP: Final = MediaType("image/webp", ".webp", "WebP image")
_PDF: Final = MediaType("application/pdf", ".pdf", "PDF document")
_GZIP: Final = MediaType("application/gzip", ".gz", "gzip archive")
_ZIP: Final = MediaType("application/zip", ".zip", "zip archive")
_MAGIC: Final[tuple[tuple[bytes, MediaType], ...]] = (
    (b"\x89PNG\r\n\x1a\n", _PNG),
    (b"\xff\xd8\xff", _JPEG),
    (b"GIF87a", _GIF),
    (b"GIF89a", _GIF),
    (b"%PDF-", _PDF),
    (b"\x1f\x8b", _GZIP),
    (b"PK\x03\x04", _ZIP),
)
_SUFFIXES: Final = {
    media.mime_type: media.suffix for media in (_PNG, _JPEG, _GIF, _WEBP, _PDF, _GZIP, _ZIP)
}


def sniff_media(data: bytes) -> MediaType | None:
    """The kind of ``data`` from its first bytes, or ``None`` when it is not one we know."""
    for magic, media in _MAGIC:
        if data.startswith(magic):
            return media
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _WEBP
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
    return len(data) * 3 // 4 - min(padding, 2)
