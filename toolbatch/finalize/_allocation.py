"""Max-min fair (water-fill) allocation of a character budget across text slots.

Pure arithmetic: no I/O, no async, no knowledge of parts or responses.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, islice, repeat
from operator import gt

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
    # Shortest first. Fixing the shortest slot can only raise the fair share of the others
    # (floor((R - L) / (k - 1)) >= floor(R / k) when L <= R / k), so one pass over the sorted
    # lengths finds the final share: the slots it cuts are exactly those longer than it
    # (every shorter one was fixed at a share no larger), as in the textbook round-based loop.
    for position, length in enumerate(sorted(lengths)):
        share = remaining // (count - position)
        if length > share:
            break
        remaining -= length
    else:  # unreachable: the lengths do not fit, so some slot is longer than its share
        return list(lengths)
    allocation = [length if length <= share else share for length in lengths]
    leftover = remaining - share * (count - position)
    if leftover:
        cut = compress(range(count), map(gt, lengths, repeat(share)))
        for slot in islice(cut, leftover):
            allocation[slot] += 1
    return allocation
