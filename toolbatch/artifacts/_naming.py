"""Artifact names: the call id and tool made safe for a file name, plus a content digest.

A name is ``<tool>-<safe call id>-<digest><suffix>``. The digest is the XXH3-128 (all 128
bits, 32 hex digits) of a fixed prefix, the call id and the content; it makes a name

* unique: two calls never share a name (their ids differ, and where making an id safe
  loses characters, their digests do), nor do two contents of one call (the odds of an
  accidental 128-bit collision are nil);
* verifiable: anyone can check a file against its name (the XXH3-128 of
  ``toolbatch-artifact\\0``, the call id in UTF-8, ``\\0`` and the file's bytes, see
  :func:`digest_prefix`);
* reusable: the same content for the same call gets the same name and is written once.

Why XXH3-128 and not SHA-256 (the digest in the names of earlier versions, 24 hex digits):
hashing was the largest single cost of persisting (SHA-256 runs at about 1.9 GB/s on one
core here, XXH3 at over 20 GB/s), and on a loaded machine that CPU is what a batch waits
for (issue 33). What SHA-256 gave beyond that, resistance to *crafted* collisions, is not
what the store relies on: an artifact is never reused because its digest matches, only
when its bytes are the new content (compared in full), so a crafted pair of contents can
at worst share a name within one call (the later write replaces the earlier file, as it
replaces a planted one), never pass one content off as another, nor touch another call's
file while the call id is already a safe name (the usual case). Old names stay readable:
nothing parses the digest, and ``toolbatch artifacts show`` finds a call's files by the
``-<safe call id>-`` part; an artifact written with an old name is simply not found for
reuse under the new one (the same content is written once more).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from typing import Final

import xxhash

__all__ = [
    "DIGEST_HEX_CHARS",
    "MAX_ID_CHARS",
    "MAX_TOOL_CHARS",
    "artifact_name",
    "ascii_bytes",
    "digest_prefix",
    "encode_text",
    "safe_name_component",
    "safe_suffix",
]

MAX_ID_CHARS: Final = 64
MAX_TOOL_CHARS: Final = 32
DIGEST_HEX_CHARS: Final = 32
"""All of the XXH3-128 digest (names of earlier versions have 24 hex digits of SHA-256)."""
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


def digest_prefix(call_id: str) -> xxhash.xxh3_128:
    """The hasher of ``call_id``'s artifact names, fed with the prefix and the call id: add
    the content, then take ``hexdigest()``."""
    hasher = xxhash.xxh3_128(b"toolbatch-artifact\0")
    hasher.update(call_id.encode("utf-8", "surrogatepass"))
    hasher.update(b"\0")
    return hasher


def artifact_name(call_id: str, tool_name: str, digest: str, suffix: str = ".txt") -> str:
    """The file name for ``call_id``'s output of ``tool_name`` with content ``digest``."""
    tool = safe_name_component(tool_name, MAX_TOOL_CHARS)
    return f"{tool}-{safe_name_component(call_id)}-{digest[:DIGEST_HEX_CHARS]}{suffix}"


def _load_utf8_view() -> Callable[[str], memoryview] | None:
    """CPython's own UTF-8 bytes of a ``str``, as a read-only view (no copy), or ``None``
    where the interpreter has no ``PyUnicode_AsUTF8AndSize`` to call."""
    try:
        as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
        from_memory = ctypes.pythonapi.PyMemoryView_FromMemory
    except AttributeError:  # not CPython
        return None
    as_utf8.restype = ctypes.c_void_p
    as_utf8.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
    from_memory.restype = ctypes.py_object
    from_memory.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]

    def utf8_view(text: str) -> memoryview:
        size = ctypes.c_ssize_t()
        address = as_utf8(text, ctypes.byref(size))
        view: memoryview = from_memory(address, size.value, _PYBUF_READ)
        return view

    return utf8_view


_PYBUF_READ: Final = 0x100
_utf8_view: Final = _load_utf8_view()


def ascii_bytes(text: str) -> bytes | memoryview:
    """The bytes of ASCII ``text``: a read-only view of the string's own bytes where CPython
    lends them (no copy, no allocation), else ``text.encode("ascii")``.

    The view does not keep ``text`` alive: hold ``text`` as long as the view is used.
    Why: a 1 MB ``encode`` copies the text while holding the GIL, into memory freshly
    faulted in, and that copy was the largest single CPU cost of persisting (issue 33).
    For ASCII text, CPython's UTF-8 bytes *are* the string's storage, so nothing is made.
    """
    if _utf8_view is None or not str.isascii(text):  # str's own: a subclass may override it
        return text.encode("ascii")
    return _utf8_view(text)


def encode_text(text: str) -> bytes:
    """``text`` as UTF-8; lone surrogates cannot be, and are kept visible as ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace")
