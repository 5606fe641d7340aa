"""Water-fill allocation: max-min fair, within budget, deterministic, O(n log n)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from toolbatch.finalize._allocation import allocate_budget

lengths_lists = st.lists(st.integers(0, 5_000), max_size=60)


def reference_waterfill(lengths: list[int], budget: int) -> list[int]:
    """The textbook round-based loop (quadratic), as the design note describes it."""
    allocation = [0] * len(lengths)
    remaining = max(0, budget)
    active = list(range(len(lengths)))
    while active:
        share = remaining // len(active)
        small = [i for i in active if lengths[i] <= share]
        if not small:
            for i in active:
                allocation[i] = share
            for i in active[: remaining - share * len(active)]:
                allocation[i] += 1
            break
        for i in small:
            allocation[i] = lengths[i]
            remaining -= lengths[i]
        fixed = set(small)
        active = [i for i in active if i not in fixed]
    return allocation


@given(lengths_lists, st.integers(-10, 200_000))
def test_matches_the_round_based_reference(lengths: list[int], budget: int) -> None:
    """The one-pass sorted allocation equals the textbook loop on every input."""
    assert allocate_budget(lengths, budget) == reference_waterfill(lengths, budget)


@given(lengths_lists, st.integers(-10, 200_000))
def test_allocation_is_max_min_fair_and_within_budget(lengths: list[int], budget: int) -> None:
    """Sum within budget, no slot above its length, cut slots equal within one, earliest first."""
    allocation = allocate_budget(lengths, budget)
    assert len(allocation) == len(lengths)
    assert sum(allocation) <= max(budget, 0)
    assert all(0 <= a <= n for a, n in zip(allocation, lengths, strict=True))
    cut = [i for i, (a, n) in enumerate(zip(allocation, lengths, strict=True)) if a < n]
    if not cut:
        assert allocation == lengths
        return
    # The budget is used up exactly when anything is cut.
    assert sum(allocation) == max(budget, 0)
    shares = [allocation[i] for i in cut]
    assert max(shares) - min(shares) <= 1
    # The +1 leftovers go to the earliest cut slots.
    assert shares == sorted(shares, reverse=True)
    # Every untouched slot is no longer than the water level, or the level plus the one
    # leftover unit it was given ([1, 1] with a budget of 1 gives [1, 0]).
    level = max(shares)
    assert all(lengths[i] <= level + 1 for i in range(len(lengths)) if i not in set(cut))


@pytest.mark.parametrize(
    ("lengths", "budget", "expected"),
    [
        pytest.param([7_048, 7_048], 10_000, [5_000, 5_000], id="two-shell-results"),
        pytest.param([10, 100, 1_000], 300, [10, 100, 190], id="small-slots-keep-all"),
        pytest.param([50, 50, 50], 10, [4, 3, 3], id="leftover-to-earliest"),
        pytest.param([5, 5], 1, [1, 0], id="budget-below-slot-count"),
        pytest.param([5, 5], 0, [0, 0], id="zero-budget"),
        pytest.param([], 100, [], id="no-slots"),
        pytest.param([3, 0, 4], 100, [3, 0, 4], id="everything-fits"),
    ],
)
def test_named_allocations(lengths: list[int], budget: int, expected: list[int]) -> None:
    """Worked examples, including the 14,096-versus-10,000 repro."""
    assert allocate_budget(lengths, budget) == expected


def test_ten_thousand_slots_use_the_budget_exactly() -> None:
    """A large batch of varied slots is allocated in one pass, using the whole budget."""
    lengths = [2**i % 9_973 + i for i in range(10_000)]
    budget = sum(lengths) // 3
    allocation = allocate_budget(lengths, budget)
    assert sum(allocation) == budget
