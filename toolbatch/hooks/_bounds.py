"""Bounding what a hook reads: arguments and responses cut to a share of the budget.

A hook reads the call's arguments (the model chose them: one may be 20 MB) and, after a
call, its response before the batch is finalized (an MCP result of 60 parts can be 30 MB).
Every hook input is therefore cut to the session's batch budget (200,000 characters when
there is none): a JSON value that does not fit keeps its shape, and its long strings share
what fits (small ones stay whole, the longest are cut first), each cut string keeping a
head and a tail around a marker that says how much was cut and where the whole is. A value
whose structure alone does not fit (a million small items) becomes a string preview of its
JSON. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from pydantic import JsonValue

from toolbatch._core import HEAD_DIVISOR, compact_json, safe_prefix, safe_suffix

__all__ = [
    "DEFAULT_HOOK_INPUT_CHARS",
    "bound_json",
    "bound_json_each",
    "bound_object",
    "hook_input_chars",
]

DEFAULT_HOOK_INPUT_CHARS: Final = 200_000
"""What one hook input may hold when the session has no batch budget."""
_MARKER_CHARS: Final = 160
"""Room kept for each cut string's marker."""


def hook_input_chars(budget: int | None) -> int:
    """The characters a hook input's bounded value may take for a session ``budget``."""
    return budget if budget is not None and budget > 0 else DEFAULT_HOOK_INPUT_CHARS


def _strings(value: JsonValue, found: list[str]) -> None:
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            found.append(key)
            _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)


def _skeleton(value: JsonValue) -> JsonValue:
    """``value`` with every long string emptied: what its structure alone costs."""
    if isinstance(value, str):
        return value if len(value) <= _MARKER_CHARS else ""
    if isinstance(value, dict):
        return {
            (key if len(key) <= _MARKER_CHARS else str(index)): _skeleton(item)
            for index, (key, item) in enumerate(value.items())
        }
    if isinstance(value, list):
        return [_skeleton(item) for item in value]
    return value


def _shares(lengths: list[int], available: int) -> int:
    """The max-min fair cap: strings up to it stay whole, longer ones are cut to it."""
    remaining = available
    ordered = sorted(lengths)
    for index, length in enumerate(ordered):
        fair = remaining // (len(ordered) - index)
        if length > fair:
            return fair
        remaining -= length
    return max(ordered, default=0)


def _cut(text: str, keep: int, what: str, whole: str) -> str:
    head = max(0, keep // HEAD_DIVISOR)
    tail = max(0, keep - head)
    omitted = len(text) - head - tail
    marker = f"[... {omitted:,} characters of {what} cut for the hook; the whole: {whole} ...]"
    return f"{safe_prefix(text, head)}{marker}{safe_suffix(text, tail)}"


def _rebuild(value: JsonValue, cap: int, what: str, whole: str) -> JsonValue:
    if isinstance(value, str):
        return _cut(value, cap, what, whole) if len(value) > cap + _MARKER_CHARS else value
    if isinstance(value, dict):
        return {
            (_cut(key, cap, what, whole) if len(key) > cap + _MARKER_CHARS else key): _rebuild(
                item, cap, what, whole
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rebuild(item, cap, what, whole) for item in value]
    return value


def bound_json(value: JsonValue, limit: int, *, what: str, whole: str) -> JsonValue:
    """``value`` itself when its compact JSON fits ``limit`` characters, else a cut copy.

    Args:
        value: a JSON value (a call's arguments, a response body).
        limit: the characters its JSON may take (about: each cut string adds its marker).
        what: what the value is, for the marker (``the call's arguments``).
        whole: where the whole is, for the marker (a file, or ``not saved``).
    """
    size = len(compact_json(value))
    if size <= limit:
        return value
    strings: list[str] = []
    _strings(value, strings)
    structure = len(compact_json(_skeleton(value)))
    long = [len(text) for text in strings if len(text) > _MARKER_CHARS]
    available = limit - structure - _MARKER_CHARS * len(long)
    for _attempt in range(3):  # escapes (a newline is two characters) may need a retry
        if available <= 0 or not long:
            break
        bounded = _rebuild(value, _shares(long, available), what, whole)
        size = len(compact_json(bounded))
        if size <= limit + _MARKER_CHARS:
            return bounded
        available = available * limit // size - _MARKER_CHARS
    text = compact_json(value)
    return _cut(text, max(0, limit - _MARKER_CHARS), f"{what} (as JSON)", whole)


def bound_json_each(
    values: list[JsonValue], limit: int, *, what: str, wholes: list[str]
) -> list[JsonValue]:
    """``values`` bounded together to ``limit`` characters (small ones stay whole); each
    cut one's marker names its own ``wholes`` entry."""
    if len(compact_json(values)) <= limit or not values:
        return values
    lengths = [len(compact_json(value)) for value in values]
    cap = _shares(lengths, limit)
    return [
        bound_json(value, cap, what=what, whole=whole) if length > cap else value
        for value, length, whole in zip(values, lengths, wholes, strict=True)
    ]


def bound_object(
    value: dict[str, JsonValue], limit: int, *, what: str, whole: str
) -> dict[str, JsonValue]:
    """:func:`bound_json` for an object that must stay one: a structure too large to keep
    becomes ``{"truncated": <a preview of its JSON>}``."""
    bounded = bound_json(value, limit, what=what, whole=whole)
    return bounded if isinstance(bounded, dict) else {"truncated": bounded}
