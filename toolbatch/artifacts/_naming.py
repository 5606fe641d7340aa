"""Artifact names: the call id and tool made safe for a file name, plus a content digest.

A name is ``<tool>-<safe call id>-<digest><suffix>``, the digest being the first
``DIGEST_HEX_CHARS`` hex digits of the SHA-256 of a fixed prefix, the call id and the
content: the same content for the same call gets the same name (written once), two calls
never share one, and anyone can verify a file against its name.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = [
    "DIGEST_HEX_CHARS",
    "MAX_ID_CHARS",
    "MAX_TOOL_CHARS",
    "artifact_name",
    "digest_prefix",
    "encode_text",
    "safe_name_component",
    "safe_suffix",
]

MAX_ID_CHARS: Final = 64
MAX_TOOL_CHARS: Final = 32
DIGEST_HEX_CHARS: Final = 24
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name_component(value: str, max_chars: int = MAX_ID_CHARS) -> str:
    """``value`` made safe for a file name: no separators, dots-only or control characters.

    Runs of anything outside ``[A-Za-z0-9._-]`` become one ``_``; leading dots are dropped
    (no ``.``, ``..`` or hidden names); the result is at most ``max_chars`` long and never
    empty.
    """
    cleaned = _UNSAFE.sub("_", value[: max_chars * 8]).lstrip(".")
    return cleaned[:max_chars] or "_"


def safe_suffix(suffix: str) -> str:
    """A file suffix made safe (``.png``); anything odd becomes ``.bin``."""
    cleaned = _UNSAFE.sub("", suffix.lstrip("."))[:12]
    return f".{cleaned}" if cleaned else ".bin"


def digest_prefix(call_id: str) -> hashlib._Hash:
    """The hasher of ``call_id``'s artifact names, fed with the call id: add the content."""
    hasher = hashlib.sha256(b"toolbatch-artifact\0")
    hasher.update(call_id.encode("utf-8", "surrogatepass"))
    hasher.update(b"\0")
    return hasher


def artifact_name(call_id: str, tool_name: str, digest: str, suffix: str = ".txt") -> str:
    """The file name for ``call_id``'s output of ``tool_name`` with content ``digest``."""
    tool = safe_name_component(tool_name, MAX_TOOL_CHARS)
    return f"{tool}-{safe_name_component(call_id)}-{digest[:DIGEST_HEX_CHARS]}{suffix}"


def encode_text(text: str) -> bytes:
    """``text`` as UTF-8; lone surrogates cannot be, and are kept visible as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace")
