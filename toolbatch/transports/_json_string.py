"""JSON as JavaScript writes it: byte accounting, single-string preview selection, and
``JSON.stringify``-compatible lines (``dumps_json_line``, what every transport writes).

Transport budgets are stated in UTF-8 bytes of ``JSON.stringify(value)``, so a Python
consumer and a JavaScript one agree to the byte. For strings without surrogates
``pydantic_core.to_json`` writes exactly what ``JSON.stringify`` writes (raw UTF-8, DEL and
U+2028/U+2029 unescaped, ``\\b \\t \\n \\f \\r`` and lowercase ``\\u00xx`` for other controls).
Surrogate code points differ: JavaScript joins a high surrogate followed by a low one into
one 4-byte character and escapes every other surrogate as ``\\udXXX`` (6 bytes).

Everything here is pure: no I/O, no async. Costs are bounded: measuring is linear in C and
works in fixed-size chunks (no full-size copy), and projecting reads at most ``max_bytes``
code points from each end of the string, so a 1 GB string projects as fast as a 1 MB one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

from pydantic import JsonValue
from pydantic_core import PydanticSerializationError, to_json

from toolbatch._core import splits_pair
from toolbatch.errors import ConfigError

__all__ = [
    "HEADLESS_MARKER",
    "HEADLESS_TOOL_RESULT_JSON_BYTES",
    "dumps_json_line",
    "join_surrogate_pair",
    "json_string_bytes",
    "project_json_string",
]

HEADLESS_TOOL_RESULT_JSON_BYTES: Final = 65_536
"""Budget of a headless ``tool_result.content``: UTF-8 bytes of its JSON string, quotes included."""

HEADLESS_MARKER: Final = "\n[... truncated for Headless transport ...]\n"
"""What replaces the middle of a headless ``tool_result.content`` that is over budget."""

_QUOTE_BYTES: Final = 2
_CHUNK_CODE_POINTS: Final = 1 << 16
"""Measure long strings in slices this long: keeps buffers in cache and memory flat."""
_SURROGATE_CHUNK_CODE_POINTS: Final = 1 << 13
_HEAD_SHARE_NUMERATOR: Final = 1
_HEAD_SHARE_DENOMINATOR: Final = 5
"""The head keeps floor(1/5) of the preview's source bytes; the tail gets the rest."""

_LONE_SURROGATE_EXTRA_BYTES: Final = 5
"""``\\udXXX`` is 6 bytes where the ``?`` that ``encode(errors="replace")`` leaves is 1."""
_PAIR_SAVED_BYTES: Final = 8
"""A joined pair is 4 bytes, not the 2 x 6 of two lone surrogates."""
_HIGH_SURROGATE_UTF8: Final = re.compile(rb"\xed[\xa0-\xaf]")
_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def json_string_bytes(s: str) -> int:
    """UTF-8 byte length of JavaScript's ``JSON.stringify(s)``, both quotes included.

    Escapes are counted as ``JSON.stringify`` writes them: ``"`` and ``\\`` take 2 bytes,
    control characters 2 (``\\n`` and friends) or 6 (``\\u001f``), a high surrogate
    directly followed by a low one 4 bytes together, every other surrogate 6 (``\\udXXX``),
    anything else its raw UTF-8 length.

    Example:
        >>> json_string_bytes('a"é😀')
        11
    """
    return _payload_bytes(s) + _QUOTE_BYTES


def project_json_string(
    s: str,
    max_bytes: int = HEADLESS_TOOL_RESULT_JSON_BYTES,
    marker: str = HEADLESS_MARKER,
) -> str:
    """``s`` bounded to ``max_bytes`` of JSON (``json_string_bytes``), head and tail kept.

    When ``s`` fits it is returned as is (the same object). Otherwise the result is the
    longest prefix of ``s`` within about 20% of the bytes left beside ``marker``, then
    ``marker``, then the longest suffix of ``s`` within the remaining bytes; the marker's
    bytes count. No code point is split, nor a high surrogate from the low one after it.
    When even ``marker`` does not fit, the result is the longest prefix of ``s`` that does.

    The result always fits, so projecting it again returns it unchanged. The cost depends
    on ``max_bytes``, not on ``len(s)``: a string with more code points than ``max_bytes``
    cannot fit (every code point costs at least one byte), and the preview reads at most
    ``max_bytes`` code points from each end.

    Args:
        s: the text to bound.
        max_bytes: the budget in UTF-8 bytes of ``JSON.stringify(result)``, quotes
            included; at least 2.
        marker: what stands for the dropped middle.

    Raises:
        ConfigError: ``max_bytes`` is below 2, so not even ``""`` fits.
    """
    if max_bytes < _QUOTE_BYTES:
        raise ConfigError(
            f"max_bytes must be at least {_QUOTE_BYTES} (the two quotes of an empty JSON "
            f"string), got {max_bytes!r}; pass a larger budget"
        )
    payload_budget = max_bytes - _QUOTE_BYTES
    if len(s) <= payload_budget and _payload_bytes(s) <= payload_budget:
        return s
    marker_bytes = _payload_bytes(marker)
    if payload_budget < marker_bytes:
        head_end, _ = _fit_prefix(s, payload_budget)
        return s[:head_end]
    source_budget = payload_budget - marker_bytes
    head_budget = source_budget * _HEAD_SHARE_NUMERATOR // _HEAD_SHARE_DENOMINATOR
    head_end, head_used = _fit_prefix(s, head_budget)
    # Bytes the head could not use (a wide character at its edge) go to the tail.
    tail_start = _fit_suffix(s, source_budget - head_used, floor=head_end)
    return s[:head_end] + marker + s[tail_start:]


def _payload_bytes(s: str) -> int:
    """``json_string_bytes(s)`` without the quotes."""
    if len(s) <= _CHUNK_CODE_POINTS:
        return _chunk_payload_bytes(s)
    return sum(_chunk_payload_bytes(s[start:end]) for start, end in _chunks(s, _CHUNK_CODE_POINTS))


def _chunk_payload_bytes(s: str) -> int:
    try:
        return len(to_json(s)) - _QUOTE_BYTES
    except PydanticSerializationError:
        pass
    # Surrogates, which to_json refuses. Smaller slices keep the passes below in cache.
    if len(s) <= _SURROGATE_CHUNK_CODE_POINTS:
        return _surrogate_payload_bytes(s)
    return sum(
        _surrogate_payload_bytes(s[start:end])
        for start, end in _chunks(s, _SURROGATE_CHUNK_CODE_POINTS)
    )


def _chunks(s: str, size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` slices of ``size`` code points, none separating a surrogate pair."""
    length = len(s)
    start = 0
    while start < length:
        end = start + size
        if splits_pair(s, end):
            end += 1
        yield start, min(end, length)
        start = end


def _surrogate_payload_bytes(s: str) -> int:
    # "replace" turns each surrogate into one "?", which to_json counts as 1 byte;
    # "surrogatepass" writes each as 3 bytes, so the difference counts them.
    replaced = s.encode("utf-8", "replace")
    passed = s.encode("utf-8", "surrogatepass")
    surrogates = (len(passed) - len(replaced)) // 2
    total = len(to_json(replaced)) - _QUOTE_BYTES + surrogates * _LONE_SURROGATE_EXTRA_BYTES
    if _HIGH_SURROGATE_UTF8.search(passed) is not None:
        total -= len(_SURROGATE_PAIR.findall(s)) * _PAIR_SAVED_BYTES
    return total


def _fit_prefix(s: str, budget: int) -> tuple[int, int]:
    """The end of the longest prefix of ``s`` within ``budget`` payload bytes, and its bytes.

    A descent over slice sizes: try a slice, keep it when it fits, halve the size when it
    does not. Costs add up slice by slice because no slice boundary splits a pair, and
    every code point costs at least one byte, so no more than ``budget`` code points are
    read.
    """
    length = len(s)
    end = 0
    used = 0
    step = min(budget, length)
    while step > 0:
        stop = min(end + step, length)
        if splits_pair(s, stop):
            stop = stop - 1 if stop - 1 > end else stop + 1
        cost = _payload_bytes(s[end:stop])
        if used + cost <= budget:
            used += cost
            end = stop
            step = min(step, budget - used, length - end)
        else:
            step //= 2
    return end, used


def _fit_suffix(s: str, budget: int, *, floor: int) -> int:
    """The start of the longest suffix of ``s[floor:]`` within ``budget`` payload bytes."""
    start = len(s)
    used = 0
    step = min(budget, start - floor)
    while step > 0:
        begin = max(start - step, floor)
        if splits_pair(s, begin):
            begin = begin + 1 if begin + 1 < start else begin - 1
            if begin < floor:
                step //= 2
                continue
        cost = _payload_bytes(s[begin:start])
        if used + cost <= budget:
            used += cost
            start = begin
            step = min(step, budget - used, start - floor)
        else:
            step //= 2
    return start


def dumps_json_line(value: JsonValue | dict[str, Any]) -> str:
    """``value`` as one line of ``JSON.stringify``-compatible JSON (no trailing newline).

    Compact, UTF-8 characters raw; a high surrogate followed by a low one is written as the
    character they form, every other surrogate as a ``\\udXXX`` escape, non-finite floats as
    ``null``: exactly what JavaScript writes, and always encodable as UTF-8.
    """
    try:
        return to_json(value, inf_nan_mode="null").decode()
    except PydanticSerializationError:
        pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = _SURROGATE_PAIR.sub(join_surrogate_pair, text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def join_surrogate_pair(match: re.Match[str]) -> str:
    """The character a matched high and low surrogate form (for ``re.sub``)."""
    pair = match.group()
    high, low = pair[0], pair[1]
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))
