"""Cutting text: never more than asked, always a true prefix/suffix, never half a pair."""

from __future__ import annotations

from hypothesis import given, strategies as st

from toolbatch._core._text import safe_prefix, safe_suffix, splits_pair

PIECES = st.sampled_from(["a", "é", "中", "😀", "\ud83d\ude00", "\ud83d", "\ude00", "\n"])
TEXTS = st.lists(PIECES, max_size=40).map("".join)


@given(text=TEXTS, size=st.integers(-2, 90))
def test_prefix_and_suffix_are_bounded_true_ends_that_keep_pairs_whole(
    text: str, size: int
) -> None:
    """Each end is at most ``size`` long, a true end of the text, never cut mid-pair."""
    head = safe_prefix(text, size)
    tail = safe_suffix(text, size)
    assert len(head) <= max(size, 0)
    assert len(tail) <= max(size, 0)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert not splits_pair(text, len(head))
    assert not splits_pair(text, len(text) - len(tail))
    assert len(head) >= min(size, len(text)) - 1
    assert len(tail) >= min(size, len(text)) - 1


def test_a_pair_at_the_cut_moves_the_cut_off_it() -> None:
    """A high surrogate followed by its low half is kept or dropped together."""
    text = "ab\ud83d\ude00cd"
    assert safe_prefix(text, 3) == "ab"
    assert safe_suffix(text, 3) == "cd"
    assert safe_prefix(text, 4) == "ab\ud83d\ude00"
