"""Max-min fair (water-fill) allocation of a character budget across text slots.

Pure arithmetic: no I/O, no async, no knowledge of parts or responses.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["allocate_budget"]


def allocate_budget(lengths: Sequence[int], budget: int) -> list[int]:
    """Share ``budget`` across slots of the given ``lengths``, max-min fairly.

    Every slot no longer than the final fair share keeps its whole length; the longer slots
    share what is left equally, and the leftover units go one each to the earliest of them
    (by index). The allocations never exceed the lengths, and their sum never exceeds
    ``max(budget, 0)``. Deterministic, and O(n log n) in the number of slots.

    Args:
        lengths: each slot's length (non-negative), in slot order.
        budget: the units to share; a negative budget shares nothing.

    Returns:
        One allocation per slot, in slot order.
    """
    count = len(lengths)
    remaining = max(budget, 0)
    if sum(lengths) <= remaining:
        return list(lengths)
    allocation = [0] * count
    # Shortest first, ties by index. Fixing the shortest slot can only raise the fair share
    # of the others (floor((R - L) / (k - 1)) >= floor(R / k) when L <= R / k), so one pass in
    # ascending order fixes exactly the slots the textbook round-based loop would.
    order = sorted(range(count), key=lengths.__getitem__)
    for position, index in enumerate(order):
        active = count - position
        share = remaining // active
        length = lengths[index]
        if length > share:
            cut = order[position:]
            for slot in cut:
                allocation[slot] = share
            leftover = remaining - share * active
            for slot in heapq.nsmallest(leftover, cut):
                allocation[slot] += 1
            break
        allocation[index] = length
        remaining -= length
    return allocation
