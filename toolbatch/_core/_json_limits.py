"""Nesting limits for JSON that arrives from outside, checked before it is parsed.

Python's ``json`` parser recurses once per nesting level: a 2 KB line nested 1,000 deep
raises ``RecursionError`` (not ``ValueError``), and a value that parses may still break
later recursive code (pydantic refuses more than about 255 levels, ``json.dumps`` recurses
too). So every boundary that parses foreign JSON (``toolbatch serve``, ``toolbatch acp``,
``toolbatch run``'s batch, MCP stdio messages) measures the nesting first, in linear time
and without recursion, and refuses a document deeper than ``MAX_JSON_DEPTH`` with a
``JsonTooDeep`` (a ``ValueError``) that the boundary turns into an error for that message
only. Size limits are each boundary's own (a line or message cap, see there).

How the depth is measured, in time linear in the document and mostly in C: escaped
backslashes and quotes are dropped, then every byte but quotes and brackets (``{}`` read as
``[]``); adjacent quotes go (an empty string, or the end of one string and the start of the
next: either way every other quote keeps its meaning), and so do adjacent ``][`` (leaving a
container and entering its sibling never changes the deepest level). What is left is
matched by one regular expression, built once per limit, that accepts strings and
containers nested up to the limit with possessive repeats only, so it never backtracks
(when no string is left and the runs of brackets are long, they are counted run by run).
Unclosed input is judged like closed input: the skeleton is padded with a closing quote
when one is missing and ``limit + 1`` closing brackets, so ``[`` repeated 5,000 times is
too deep (the parser would recurse 5,000 times before finding the end), while a document
that goes wrong before it gets deep is left to the parser to report. A 64 MiB line takes
a fraction of what ``json.loads`` takes on it; a document with no more opening brackets
than the limit is accepted after two ``count`` calls.
"""

from __future__ import annotations

import functools
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
_NOT_SKELETON: Final = bytes(b for b in range(256) if b not in b'[]{}"')
_STRINGS: Final = rb'(?:"[^"]*+")*+'
_RUNS: Final = re.compile(rb"\[+|\]+")
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than the limit (refused before parsing)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"JSON nested deeper than {limit} levels of arrays and objects; send flatter data "
            f"(the limit is toolbatch's MAX_JSON_DEPTH)"
        )
        self.limit = limit


def json_too_deep(data: bytes | bytearray | str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``data`` nests arrays and objects deeper than ``max_depth``, closed or not."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False
    if b"\\" in raw:  # after dropping \\ and \" every quote left delimits a string
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = raw.translate(_SQUARE, _NOT_SKELETON)
    del raw
    if b'"' in skeleton:
        skeleton = skeleton.replace(b'""', b"")
    # Worth a pass in C only while it removes much: the expression costs more per byte.
    while (siblings := skeleton.count(b"][")) * 16 > len(skeleton):
        skeleton = skeleton.replace(b"][", b"")
    if siblings * 64 < len(skeleton) and b'"' not in skeleton:
        return _deepest_run(skeleton, max_depth) > max_depth  # long runs: cheaper by run
    if skeleton.count(b'"') % 2:
        skeleton += b'"'
    skeleton += b"]" * (max_depth + 1)
    matched = _nesting(max_depth).match(skeleton)
    assert matched is not None  # the expression matches the empty string
    # It stops at a "[" only when that container goes deeper than the limit: the padding
    # closes anything shallower. A "]" it stops at is one too many (the parser stops there).
    return skeleton[matched.end() : matched.end() + 1] == b"["


def _deepest_run(brackets: bytes, max_depth: int) -> int:
    """How deep ``brackets`` (no strings left) goes, counted a run of one bracket at a time;
    stops past ``max_depth``, and at a closing bracket too many (the parser stops there)."""
    depth = deepest = 0
    for run in _RUNS.finditer(brackets):
        start, end = run.span()
        if brackets[start] == ord("["):
            depth += end - start
            deepest = max(deepest, depth)
            if deepest > max_depth:
                break
        else:
            depth -= end - start
            if depth < 0:
                break
    return deepest


@functools.lru_cache(maxsize=4)
def _nesting(max_depth: int) -> re.Pattern[bytes]:
    """Strings and containers nested at most ``max_depth`` deep, in a skeleton."""
    pattern = _STRINGS
    for _level in range(max_depth):
        pattern = rb"(?:\[" + pattern + rb'\]|"[^"]*+")*+'
    return re.compile(pattern)


def check_json_depth(data: bytes | bytearray | str, max_depth: int = MAX_JSON_DEPTH) -> None:
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
