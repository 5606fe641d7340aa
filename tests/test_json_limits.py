"""The nesting limit every boundary checks before it parses foreign JSON (issue 14, item 1)."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import JsonValue

from tests.strategies import scaled
from toolbatch._core._json_limits import (
    ABSENT,
    MAX_JSON_DEPTH,
    JsonTooDeep,
    check_json_depth,
    json_too_deep,
    top_level_member,
)

_keys = st.text(alphabet='ab"\\[]{}:,\u00e9', max_size=4)
_scalars = st.none() | st.booleans() | st.integers() | st.text(alphabet='x"\\[]{},', max_size=6)
_values: st.SearchStrategy[JsonValue] = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _nest(value: object, levels: int) -> object:
    for level in range(levels):
        value = [value] if level % 2 else {"k[": value}
    return value


@settings(max_examples=scaled(300), deadline=None)
@given(_values, st.integers(0, 8), st.integers(1, 12))
def test_the_measured_depth_is_the_documents_own(value: JsonValue, extra: int, limit: int) -> None:
    """Brackets inside strings and escaped quotes never count; containers always do."""
    document = _nest(value, extra)
    for text in (json.dumps(document), json.dumps(document, indent=1, ensure_ascii=False)):
        assert json_too_deep(text, limit) == (_depth(document) > limit)


@pytest.mark.parametrize("deep", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
def test_a_document_over_the_limit_is_refused_before_parsing(deep: int) -> None:
    """1,000 levels in 2 KB: a JsonTooDeep (a ValueError) naming the limit, no RecursionError."""
    with pytest.raises(JsonTooDeep, match=f"deeper than {MAX_JSON_DEPTH} levels") as raised:
        check_json_depth(b"[" * deep + b"]" * deep)
    assert isinstance(raised.value, ValueError)
    check_json_depth(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH)


def _open_depth(text: str) -> int:
    """The deepest level reached anywhere in ``text`` (closed or not), scanned by hand."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


@settings(max_examples=scaled(300), deadline=None)
@given(_values, st.integers(0, 8), st.integers(1, 12), st.data())
def test_a_cut_document_is_judged_by_the_levels_it_opened(
    value: JsonValue, extra: int, limit: int, data: st.DataObject
) -> None:
    """Unclosed input counts every level it opens: a cut line is no way past the limit."""
    text = json.dumps(_nest(value, extra), ensure_ascii=False)
    cut = text[: data.draw(st.integers(0, len(text)))]
    assert json_too_deep(cut, limit) == (_open_depth(cut) > limit)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"[" * 5_000, id="5k-unclosed-arrays"),
        pytest.param(b'{"a":' * 2_000, id="unclosed-objects"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"params":' + b"[" * 300, id="unclosed-params"),
        pytest.param(b'["\\\\"' + b"[" * 300, id="after-an-escaped-backslash"),
    ],
)
def test_unclosed_brackets_are_too_deep_not_a_recursion_error(line: bytes) -> None:
    """A 5 KB line of "[" used to pass the check and crash the parser (issue 29, item 5)."""
    assert json_too_deep(line)
    with pytest.raises(JsonTooDeep):
        check_json_depth(line)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"a": [1, 2' + b"[" * 100, id="shallow-and-unclosed"),
        pytest.param(b'["' + b"[" * 5_000, id="brackets-in-an-unclosed-string"),
        pytest.param(b"[]]" + b"[" * 5_000, id="after-a-stray-bracket"),
    ],
)
def test_input_that_fails_before_it_gets_deep_is_left_to_the_parser(line: bytes) -> None:
    """Not JSON, and the parser stops before it recurses: it reports what is wrong."""
    assert not json_too_deep(line)
    with pytest.raises(ValueError, match=r"Expecting|Unterminated|Extra data"):
        json.loads(line)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"[" * (32 << 20) + b"]" * (32 << 20), id="64MiB-deep"),
        pytest.param(b"[" * (64 << 20), id="64MiB-unclosed"),
        pytest.param((b"[" * 100 + b"]" * 100) * (1 << 18), id="50MiB-within-the-limit"),
        pytest.param(b"[" + b"[]," * (21 << 20) + b"1]", id="64MiB-siblings"),
        pytest.param(b'{"a":"' + b"x[" * (32 << 20) + b'"}', id="64MiB-string"),
    ],
)
def test_a_64_mib_line_is_judged_in_linear_time(line: bytes) -> None:
    """One pass, not one per level: the deep line took 18 s before; well under a second
    now on an idle machine (the bound allows a loaded one)."""
    started = time.perf_counter()
    json_too_deep(line)
    assert time.perf_counter() - started < 5.0


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":7,"params":' + b"[" * 999 + b"]" * 999 + b"}", 7),
        pytest.param(b'{"params":' + b"[" * 999 + b"]" * 999 + b', "id" : "a\\"b"}', 'a"b'),
        pytest.param(b'{"x": {"id": 1}, "y": "id"}', ABSENT, id="nested-id-is-not-the-id"),
        pytest.param(b'{"id": [1]}', ABSENT, id="container"),
        pytest.param(b'[{"id": 1}]', ABSENT, id="array"),
        pytest.param(b'{"id": null}', None, id="null"),
    ],
)
def test_top_level_member_finds_the_id_of_a_refused_request(
    document: bytes, expected: object
) -> None:
    """A refused request is answered under its own id when one can be read."""
    assert top_level_member(document, "id") == expected
