"""JSON-string byte accounting and the single-string projection, checked against JavaScript."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings, strategies as st

from tests.strategies import scaled
from tests.transports.strategies import (
    NODE,
    is_high,
    is_low,
    js_text,
    long_js_text,
    markers,
    node_stringify,
    random_js_strings,
    reference_payload_bytes,
    splits_pair,
    unit_costs,
)
from toolbatch.errors import ConfigError, ToolbatchError
from toolbatch.transports import (
    HEADLESS_MARKER,
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    json_string_bytes,
    project_json_string,
)

BUDGET = HEADLESS_TOOL_RESULT_JSON_BYTES
MARKER_PAYLOAD = reference_payload_bytes(HEADLESS_MARKER)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", 2, id="empty"),
        pytest.param("plain ASCII", 13, id="ascii"),
        pytest.param('"\\\n\b\f\r\t', 16, id="short-escapes"),
        pytest.param("\x00\x01\x1f", 20, id="unicode-escapes"),
        pytest.param("\x7f", 3, id="del-raw"),
        pytest.param("\u2028\u2029", 8, id="line-separators-raw"),
        pytest.param("é漢😀", 11, id="utf8-widths"),
        pytest.param("\ud800", 8, id="lone-high"),
        pytest.param("\udcff", 8, id="lone-low-surrogateescape"),
        pytest.param("\ud83d\ude00", 6, id="halves-join-like-js"),
        pytest.param("\ude00\ud83d", 14, id="reversed-halves-stay-lone"),
        pytest.param("\ud83d\ud83d\ude00", 12, id="lone-high-then-pair"),
    ],
)
def test_json_string_bytes_counts_like_json_stringify(text: str, expected: int) -> None:
    """Escapes, widths and surrogates cost what JSON.stringify writes."""
    assert json_string_bytes(text) == expected


@given(js_text)
@example("\udcff" * 70_000)
@example("\ud83d" * 65_535 + "\ude00" + "x" * 10)
def test_json_string_bytes_matches_the_reference_scanner(text: str) -> None:
    """The C-speed count equals a per-character scan, across chunk boundaries too."""
    assert json_string_bytes(text) == reference_payload_bytes(text) + 2


@pytest.mark.parametrize("chunk", [1 << 13, 1 << 16], ids=["surrogate-slices", "slices"])
def test_long_strings_are_counted_across_chunks_without_splitting_pairs(chunk: int) -> None:
    """A pair straddling a measuring slice boundary still counts 4 bytes."""
    for offset in (-2, -1, 0, 1):
        text = "a" * (chunk + offset) + "\ud83d\ude00" + "\udcff" + "é" * 3
        assert json_string_bytes(text) == reference_payload_bytes(text) + 2


@pytest.mark.skipif(NODE is None, reason="node is not on PATH: JSON.stringify differential skipped")
def test_json_string_bytes_and_lines_match_node_json_stringify() -> None:
    """Over 6,000 random strings, byte counts and serialized text equal node's, byte for byte."""
    strings = random_js_strings(6_000, seed=20260812)
    strings += ["\ud83d\ude00" * 3, "\udcff\n\u2028", "x" * 70_000 + "\ud800"]
    answers = node_stringify(strings)
    mismatched_bytes = [
        s for s, (length, _) in zip(strings, answers, strict=True) if json_string_bytes(s) != length
    ]
    mismatched_text = [
        s for s, (_, text) in zip(strings, answers, strict=True) if dumps_json_line(s) != text
    ]
    assert mismatched_bytes == []
    assert mismatched_text == []
    assert sum(1 for s in strings if any(is_high(c) or is_low(c) for c in s)) > 2_000


@pytest.mark.skipif(NODE is None, reason="node is not on PATH: projection differential skipped")
def test_projections_fit_their_budget_as_node_measures_them() -> None:
    """Projected strings fit when node measures them, for tight budgets and the default."""
    cases: list[tuple[str, int]] = []
    for index, text in enumerate(random_js_strings(2_000, seed=7, max_units=200)):
        cases.append((text, 2 + index % 180))
    big = "head " + "".join(random_js_strings(400, seed=8, max_units=400)) + " tail"
    cases.append((big, BUDGET))
    projected = [project_json_string(text, max_bytes=budget) for text, budget in cases]
    answers = node_stringify(projected)
    over = [
        (budget, length)
        for (_, budget), (length, _) in zip(cases, answers, strict=True)
        if length > budget
    ]
    assert over == []
    assert answers[-1][0] > BUDGET - 8


@pytest.mark.parametrize(
    ("text", "json_bytes"),
    [
        pytest.param("x" * 65_533, 65_535, id="65535-bytes"),
        pytest.param("x" * 65_534, 65_536, id="65536-bytes"),
        pytest.param("x" * 65_531 + "é", 65_535, id="65535-bytes-ending-wide"),
        pytest.param("x" * 65_530 + "😀", 65_536, id="65536-bytes-ending-astral"),
        pytest.param("\n" * 32_767, 65_536, id="65536-bytes-all-escapes"),
    ],
)
def test_strings_at_or_under_the_budget_come_back_as_the_same_object(
    text: str, json_bytes: int
) -> None:
    """At 65,535 and 65,536 bytes nothing changes: the very same string is returned."""
    assert json_string_bytes(text) == json_bytes
    assert project_json_string(text) is text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("x" * 65_535, id="65537-bytes-ascii"),
        pytest.param("x" * 65_533 + "é", id="65537-bytes-ending-wide"),
        pytest.param("\n" * 32_766 + "é" + "x", id="65537-bytes-escapes"),
        pytest.param("x" * 65_531 + "😀", id="65537-bytes-ending-astral"),
    ],
)
def test_one_byte_over_the_budget_is_projected_to_fit(text: str) -> None:
    """At 65,537 bytes the string is previewed and the preview fits."""
    assert json_string_bytes(text) == 65_537
    projected = project_json_string(text)
    assert projected != text
    assert HEADLESS_MARKER in projected
    assert BUDGET - 3 <= json_string_bytes(projected) <= BUDGET


def test_ascii_preview_fills_the_budget_twenty_eighty() -> None:
    """A long ASCII text keeps ~20% head and ~80% tail and uses every byte."""
    text = "".join(f"line {i:07d}\n".replace("\n", ".") for i in range(100_000))
    projected = project_json_string(text)
    head, _, tail = projected.partition(HEADLESS_MARKER)
    source = BUDGET - 2 - MARKER_PAYLOAD
    assert json_string_bytes(projected) == BUDGET
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) == source // 5
    assert len(tail) == source - source // 5


def test_a_huge_string_is_projected_from_its_ends() -> None:
    """A 64 MiB string projects to the budget, its head and tail intact."""
    text = "H" * 1000 + "m" * (64 << 20) + "T" * 1000
    projected = project_json_string(text)
    assert json_string_bytes(projected) == BUDGET
    assert projected.startswith("H" * 1000)
    assert projected.endswith("T" * 1000)


def test_a_budget_below_the_marker_keeps_the_longest_prefix() -> None:
    """When even the marker does not fit, the preview is the longest prefix that does."""
    assert project_json_string("abcdefgh", max_bytes=6) == "abcd"
    assert project_json_string('a"bc', max_bytes=4) == "a"
    assert project_json_string('a"bc', max_bytes=5) == 'a"'
    assert project_json_string("😀😀", max_bytes=7) == "😀"
    assert project_json_string("anything", max_bytes=2) == ""


def test_a_budget_without_room_for_the_quotes_is_rejected() -> None:
    """max_bytes below 2 raises a ConfigError that names the value."""
    with pytest.raises(ConfigError, match=r"got 1") as caught:
        project_json_string("x", max_bytes=1)
    assert isinstance(caught.value, ToolbatchError)


def test_pairs_at_the_cut_stay_whole() -> None:
    """A high+low pair at the head or tail edge is kept or dropped as one."""
    pair = "\ud83d\ude00"
    text = "ab" + pair * 100 + "cd"
    for budget in range(10, 120):
        projected = project_json_string(text, max_bytes=budget, marker="~")
        head, _, tail = projected.partition("~")
        assert not (head and is_high(head[-1]))
        assert not (tail and is_low(tail[0]))


def _decompositions(source: str, projected: str, marker: str) -> list[tuple[int, int]]:
    """Every ``(a, b)`` with ``projected == source[:a] + marker + source[b:]`` and ``a <= b``."""
    found = []
    suffix_room = len(projected) - len(marker)
    for a in range(suffix_room + 1):
        if not projected.startswith(source[:a]):
            break
        rest = projected[a:]
        b = len(source) - (suffix_room - a)
        if rest.startswith(marker) and b >= a and rest[len(marker) :] == source[b:]:
            found.append((a, b))
    return found


def _is_maximal_preview(text: str, a: int, b: int, source: int) -> bool:
    """Cuts split no pair; the head is the longest within 20% of ``source`` bytes and the
    tail the longest within what the head left."""
    if splits_pair(text, a) or splits_pair(text, b):
        return False
    head_budget = source // 5
    head_cost = _cost(text[:a])
    tail_cost = _cost(text[b:])
    if head_cost > head_budget or tail_cost > source - head_cost:
        return False
    after_head = unit_costs(text[a:])
    if after_head and head_cost + after_head[0][1] <= head_budget:
        return False
    before_tail = unit_costs(text[:b])
    if before_tail and b > a:
        width, cost = before_tail[-1]
        if tail_cost + cost <= source - head_cost and b - width >= a:
            return False
    return True


def _cost(text: str) -> int:
    return reference_payload_bytes(text)


@settings(max_examples=scaled(250), deadline=None)
@given(st.one_of(js_text, long_js_text), st.integers(min_value=2, max_value=400), markers)
def test_projection_invariants(text: str, max_bytes: int, marker: str) -> None:
    """Never over budget, same object when it fits, idempotent, a prefix + marker + suffix
    whose cuts split no pair, the head and tail each as long as their byte shares allow."""
    projected = project_json_string(text, max_bytes=max_bytes, marker=marker)
    assert _cost(projected) + 2 <= max_bytes
    assert project_json_string(projected, max_bytes=max_bytes, marker=marker) is projected
    payload_budget = max_bytes - 2
    if _cost(text) <= payload_budget:
        assert projected is text
        return
    marker_bytes = _cost(marker)
    if payload_budget < marker_bytes:
        assert text.startswith(projected)
        assert not splits_pair(text, len(projected))
        return
    source = payload_budget - marker_bytes
    assert any(
        _is_maximal_preview(text, a, b, source) for a, b in _decompositions(text, projected, marker)
    )


def test_signature_matches_the_contract() -> None:
    """``project_json_string(s, max_bytes, marker)`` as issue 8 spells it, positionally too."""
    assert project_json_string("abcdefgh", 6) == "abcd"
    text = "x" * 100
    assert json_string_bytes(project_json_string(text, 40, "~")) <= 40
