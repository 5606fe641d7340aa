"""Cutting text without separating a surrogate pair.

Python slices by code point, so a cut never splits a character; but a Python string may
hold a high surrogate followed by a low one as two code points (text decoded with
``surrogatepass``, JSON from JavaScript), which together stand for one character that must
not be cut in two. Every preview and projection cuts through these helpers.
"""

from __future__ import annotations

__all__ = ["safe_prefix", "safe_suffix", "splits_pair"]


def splits_pair(text: str, index: int) -> bool:
    """Whether cutting ``text`` before ``index`` separates a high surrogate from its low one."""
    return (
        0 < index < len(text)
        and "\ud800" <= text[index - 1] <= "\udbff"
        and "\udc00" <= text[index] <= "\udfff"
    )


def safe_prefix(text: str, size: int) -> str:
    """At most ``size`` code points from the start, one fewer rather than split a pair."""
    size = min(size, len(text))
    if size <= 0:
        return ""
    if splits_pair(text, size):
        size -= 1
    return text[:size]


def safe_suffix(text: str, size: int) -> str:
    """At most ``size`` code points from the end, one fewer rather than split a pair."""
    size = min(size, len(text))
    if size <= 0:
        return ""
    start = len(text) - size
    if splits_pair(text, start):
        start += 1
    return text[start:]
