"""Fitting one slot: never longer than its allocation, never splitting a surrogate pair."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import pytest
from hypothesis import given, strategies as st

from tests.strategies import texts
from toolbatch.finalize._fit import (
    ARTIFACT_LINE_PREFIX,
    PREVIEW_SEPARATOR,
    TRUNCATION_HEADER,
    Excerpt,
    fit_excerpt,
    fit_text,
    omission_marker,
)

PATHS = st.lists(
    st.sampled_from(["/a/one.output", "/tmp/日本/two.txt", "/very/" + "long/" * 30 + "x.txt"]),
    max_size=2,
    unique=True,
)


def is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def is_low(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


def assert_well_formed(
    preview: str, kept: Excerpt, text: str, limit: int, paths: Sequence[str]
) -> None:
    """The preview is a (cut) header, the paths it lists whole, and a head/tail of ``text``."""
    assert len(preview) <= max(limit, 0)
    assert kept.length == len(text)
    head, tail = kept.head, kept.tail
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + len(tail) < max(len(text), 1)
    # Neither cut separates a high surrogate from the low one after it.
    assert not (head and is_high(head[-1]) and is_low(text[len(head)]))
    assert not (tail and is_low(tail[0]) and is_high(text[len(text) - len(tail) - 1]))
    if limit <= len(TRUNCATION_HEADER):
        assert preview == TRUNCATION_HEADER[: max(limit, 0)]
        return
    headers = [
        TRUNCATION_HEADER + "".join(ARTIFACT_LINE_PREFIX + path for path in listed)
        for size in range(len(paths) + 1)
        for listed in combinations(paths, size)
    ]
    omitted = omission_marker(len(text) - len(head) - len(tail))
    shapes = {
        *headers,
        *(h + PREVIEW_SEPARATOR + head for h in headers if head and not tail),
        *(h + PREVIEW_SEPARATOR + head + omitted + tail for h in headers if tail),
    }
    assert preview in shapes


@given(texts(), st.data(), PATHS)
def test_a_fit_is_never_longer_than_its_allocation(
    text: str, data: st.DataObject, paths: list[str]
) -> None:
    """Any text, any limit: at most ``limit`` code points, well formed, pairs kept together."""
    near_header = st.integers(len(TRUNCATION_HEADER) - 2, 140)
    limit = data.draw(st.one_of(st.integers(-2, len(text) + 5), near_header), label="limit")
    fitted = fit_text(text, limit, paths=paths)
    if len(text) <= limit:
        assert fitted is text
        return
    preview, kept = fit_excerpt(Excerpt.of(text), limit, paths=paths)
    assert preview == fitted
    assert_well_formed(preview, kept, text, limit, paths)


@given(texts(), st.data(), PATHS)
def test_refitting_a_preview_never_nests_and_matches_a_direct_fit(
    text: str, data: st.DataObject, paths: list[str]
) -> None:
    """A smaller fit cut from a preview's excerpt equals fitting the original, when it can."""
    if len(text) < 2:
        return
    first_limit = data.draw(st.integers(0, len(text) - 1), label="first")
    second_limit = data.draw(st.integers(-1, first_limit), label="second")
    _, kept = fit_excerpt(Excerpt.of(text), first_limit, paths=paths)
    again, again_kept = fit_excerpt(kept, second_limit, paths=paths)
    assert_well_formed(again, again_kept, text, second_limit, paths)
    assert again.count(TRUNCATION_HEADER[:10]) <= 1 or TRUNCATION_HEADER[:10] in text
    direct, direct_kept = fit_excerpt(Excerpt.of(text), second_limit, paths=paths)
    if len(direct_kept.head) <= len(kept.head) and len(direct_kept.tail) <= len(kept.tail):
        assert again == direct


def test_two_shell_results_fit_exactly_with_the_producer_path_visible() -> None:
    """7,048 characters into 5,000 with one path: exactly 5,000, head about 20%, tail 80%."""
    text = "".join(f"line {i:05d}\n" for i in range(641))[:7_048]
    path = "/tmp/one.output"
    preview, kept = fit_excerpt(Excerpt.of(text), 5_000, paths=[path])
    header = f"{TRUNCATION_HEADER}{ARTIFACT_LINE_PREFIX}{path}"
    assert preview.startswith(header + PREVIEW_SEPARATOR)
    marker = omission_marker(7_048 - len(kept.head) - len(kept.tail))
    content = 5_000 - len(header) - len(PREVIEW_SEPARATOR) - len(omission_marker(7_048))
    assert len(kept.head) == content // 5
    assert len(kept.tail) == content - content // 5
    assert preview == header + PREVIEW_SEPARATOR + kept.head + marker + kept.tail
    assert len(preview) == 5_000


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        pytest.param(0, "", id="zero"),
        pytest.param(-5, "", id="negative"),
        pytest.param(1, "T", id="one"),
        pytest.param(len(TRUNCATION_HEADER), TRUNCATION_HEADER, id="header-exactly"),
        pytest.param(len(TRUNCATION_HEADER) + 2, TRUNCATION_HEADER, id="no-room-for-preview"),
        pytest.param(len(TRUNCATION_HEADER) + 5, TRUNCATION_HEADER + "\n\nabc", id="head-only"),
    ],
)
def test_tiny_allocations_degrade_without_exceeding(limit: int, expected: str) -> None:
    """A cut header, the bare header, a head-only preview: never more than the limit."""
    assert fit_text("abcdefghij" * 100, limit) == expected


def test_a_path_is_listed_whole_or_not_at_all() -> None:
    """A path that does not fit is skipped whole; a later, shorter one is still listed."""
    long_path = "/artifacts/" + "deep/" * 40 + "out.txt"
    short_path = "/a/b.txt"
    preview = fit_text("x" * 10_000, 120, paths=[long_path, short_path])
    assert long_path[:20] not in preview
    assert preview.startswith(TRUNCATION_HEADER + ARTIFACT_LINE_PREFIX + short_path + "\n\n")
    # One short when the omitted count has fewer digits than the text's length.
    assert 119 <= len(preview) <= 120


def test_cuts_move_off_a_surrogate_pair_instead_of_splitting_it() -> None:
    """A head ending on a high surrogate, or a tail starting on its low, gives up that half."""
    pair = "\ud83d\ude00"  # two code points that only together mean 😀
    # 10 code points per unit; every cut position lands on a pair boundary at some offset.
    for offset in range(4):
        text = "a" * offset + pair * 2_000
        for limit in range(90, 110):
            preview, kept = fit_excerpt(Excerpt.of(text), limit)
            assert len(preview) <= limit
            assert not kept.head.endswith("\ud83d")
            assert not kept.tail.startswith("\ude00")


def test_a_lone_surrogate_is_an_ordinary_code_point() -> None:
    """Lone halves are kept (they are text Python can hold); only real pairs stay together."""
    text = "\udcff" * 1_000
    preview, kept = fit_excerpt(Excerpt.of(text), 200)
    assert 197 <= len(preview) <= 200  # "1,000" sized the marker; fewer are omitted
    assert kept.head == "\udcff" * len(kept.head)
    assert len(kept.head) > 0


@pytest.mark.parametrize("spare", [-2, -1, 0, 1, 2, 3])
def test_a_header_that_almost_fills_the_allocation_is_not_followed_by_text(spare: int) -> None:
    """When the listed paths leave no room for a blank line and text, the header stands alone."""
    path = "/artifacts/b.output"
    header = TRUNCATION_HEADER + ARTIFACT_LINE_PREFIX + path
    limit = len(header) + len(PREVIEW_SEPARATOR) + spare
    preview = fit_text("x" * 500, limit, paths=[path])
    assert len(preview) <= limit
    if spare <= 0:
        assert preview == header
    else:
        assert preview == header + PREVIEW_SEPARATOR + "x" * spare
