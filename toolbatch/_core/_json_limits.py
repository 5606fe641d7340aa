"""Nesting limits for JSON that arrives from outside, checked before it is parsed.

Python's ``json`` parser recurses once per nesting level: a 2 KB line nested 1,000 deep
raises ``RecursionError`` (not ``ValueError``), and a value that parses may still break
later recursive code (pydantic refuses more than about 255 levels, ``json.dumps`` recurses
too). So every boundary that parses foreign JSON (``toolbatch serve``, ``toolbatch acp``,
``toolbatch run``'s batch, MCP stdio messages) measures the nesting first, in linear time
and without recursion, and refuses a document deeper than ``MAX_JSON_DEPTH`` with a
``JsonTooDeep`` (a ``ValueError``) that the boundary turns into an error for that message
only. Size limits are each boundary's own (a line or message cap, see there).

How the depth is measured: the strings are cut out (escaped backslashes and quotes are
dropped, then the text is split on ``"`` and every other piece kept, so brackets inside
strings do not count), only the brackets are kept, and matching ``[]`` pairs are removed
pass by pass (each pass peels one level off every innermost container). A
balanced document of depth ``d`` is empty after ``d`` passes; a document still shrinking
after ``MAX_JSON_DEPTH`` passes is deeper than that. Unbalanced input (not JSON anyway) stops
shrinking early and is left to the parser to report. Everything runs in C (``bytes.split``,
``bytes.translate``, ``bytes.replace``; about a quarter of ``json.loads``'s time); a
document with no more opening brackets than the limit is accepted after two ``count``
calls.
"""

from __future__ import annotations

import json
import re
from typing import Final

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonTooDeep",
    "check_json_depth",
    "json_too_deep",
    "top_level_member",
]

MAX_JSON_DEPTH: Final = 128
"""The deepest nesting of arrays and objects accepted from outside (serde_json's default
too); pydantic refuses about 255 and Python's parser fails near 1,000."""
MAX_ID_SCAN_TOKENS: Final = 1_000_000
"""``top_level_member`` gives up after this many tokens (it only runs on rejected input)."""

_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than the limit (refused before parsing)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"JSON nested deeper than {limit} levels of arrays and objects; send flatter data "
            f"(the limit is toolbatch's MAX_JSON_DEPTH)"
        )
        self.limit = limit


def json_too_deep(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``data`` nests arrays and objects deeper than ``max_depth``."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False
    # After dropping \\ and \" every quote left delimits a string: keep what is outside.
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(unescaped.split(b'"')[::2])
    brackets = outside.translate(_SQUARE, _NOT_BRACKETS)
    for _pass in range(max_depth):
        peeled = brackets.replace(b"[]", b"")
        if len(peeled) == len(brackets):
            return False  # nothing left to peel: empty, or unbalanced (the parser reports it)
        brackets = peeled
    return b"[]" in brackets


def check_json_depth(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``JsonTooDeep`` when ``data`` nests deeper than ``max_depth``."""
    if json_too_deep(data, max_depth):
        raise JsonTooDeep(max_depth)


class _Absent:
    """No such member could be found."""


ABSENT: Final = _Absent()


def top_level_member(data: bytes, key: str) -> object:
    """The scalar value of ``key`` in the top-level object of ``data``, without parsing it.

    For answering a refused request under its own id: only a string, number, boolean or
    null value is returned; a container, a missing key or an undecidable document gives
    ``ABSENT``.
    """
    wanted = json.dumps(key).encode()
    depth = 0
    last_string: bytes | None = None
    value_start: int | None = None
    for count, match in enumerate(_TOKEN.finditer(data)):
        if count >= MAX_ID_SCAN_TOKENS:
            return ABSENT
        token = match.group()
        if token in (b"{", b"["):
            if depth == 0 and token == b"[":
                return ABSENT
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return _scalar(data, value_start, match.start())
        elif depth != 1:
            continue
        elif token == b":":
            value_start = match.end() if last_string == wanted else None
        elif token == b",":
            if value_start is not None:
                return _scalar(data, value_start, match.start())
        else:
            last_string = token
    return ABSENT


def _scalar(data: bytes, start: int | None, end: int) -> object:
    if start is None:
        return ABSENT
    raw = data[start:end].strip()
    if not raw or raw[:1] in (b"[", b"{"):
        return ABSENT
    try:
        value = json.loads(raw)
    except ValueError:
        return ABSENT
    return value
