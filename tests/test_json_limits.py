"""The nesting limit every boundary checks before it parses foreign JSON (issue 14, item 1)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


def test_unbalanced_input_is_left_to_the_parser() -> None:
    """Not JSON, but not deep: the parser reports what is wrong with it."""
    assert not json_too_deep(b'{"a": [1, 2' + b"[" * 300)


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
