"""Lone surrogates: legal in Python and JavaScript strings, fatal to UTF-8 JSON.

A Python ``str`` holds whole code points, so any code point in U+D800..U+DFFF is a lone
surrogate (``json.loads`` joins an escaped pair into one astral code point). pydantic-core,
jiter and orjson refuse them, so a message holding one is dropped and its call hangs; they
are replaced with U+FFFD before a message is sent and when a received message needs it.
"""

from __future__ import annotations

import re
from typing import Final, TypeVar

__all__ = ["REPLACEMENT_CHAR", "has_lone_surrogate", "scrub_surrogates"]

REPLACEMENT_CHAR: Final = "\ufffd"
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_T = TypeVar("_T")


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a code point that cannot be encoded as UTF-8."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def scrub_surrogates(value: _T) -> _T:
    """``value`` with every lone surrogate in its strings (and keys) replaced by U+FFFD.

    Walks dicts, lists and tuples; returns the same object when nothing needed replacing.
    """
    return _scrub(value)  # type: ignore[return-value]


def _scrub(value: object) -> object:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub(REPLACEMENT_CHAR, value) if has_lone_surrogate(value) else value
    if isinstance(value, dict):
        changed = False
        result: dict[object, object] = {}
        for key, item in value.items():
            new_key = _scrub(key)
            new_item = _scrub(item)
            changed = changed or new_key is not key or new_item is not item
            result[new_key] = new_item
        return result if changed else value
    if isinstance(value, list | tuple):
        items = [_scrub(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value
