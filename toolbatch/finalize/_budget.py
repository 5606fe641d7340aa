"""The one budget value: its default, its validation, and when the finalizer ignores it.

The public API takes a positive ``int`` of code points, or ``None`` / ``math.inf`` for no
budget; :func:`check_budget` turns that into the one internal form, ``int | None``, where it
enters (``SchedulerConfig``, a per-batch budget). The wire and command-line edges, whose
documented "no budget" is ``0`` or ``null``, go through :func:`budget_from_wire`.
:func:`effective_budget` is the low-level rule of ``finalize_tool_responses`` and the send
guard, as the design states it: a non-positive or infinite budget is a no-op.
"""

from __future__ import annotations

import math
from typing import Final, TypeAlias

from toolbatch.errors import ConfigError

__all__ = [
    "DEFAULT_BATCH_BUDGET_CHARS",
    "Budget",
    "budget_from_wire",
    "check_budget",
    "effective_budget",
]

DEFAULT_BATCH_BUDGET_CHARS: Final = 200_000
"""The budget runtimes use by default: code points of model-facing tool text per batch."""

Budget: TypeAlias = int | None
"""A checked budget: a positive number of code points, or ``None`` for no budget."""


def _fix(name: str) -> str:
    return (
        f"pass a positive int of characters (e.g. {name}={DEFAULT_BATCH_BUDGET_CHARS}), or "
        f"None (or math.inf) for no budget"
    )


def check_budget(value: object, *, name: str = "batch_budget") -> Budget:
    """The budget ``value`` in its one internal form.

    Raises:
        ConfigError: anything but a positive int, ``None`` or ``math.inf`` (0, negatives,
            fractions, NaN, bools, strings...), naming the value and the fix.
    """
    if value is None:
        return None
    if isinstance(value, float) and value == math.inf:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a positive int or None, got {value!r}; {_fix(name)}")
    if value <= 0:
        raise ConfigError(
            f"{name} must be positive, got {value!r}; {_fix(name)} (0 means 'no budget' only "
            f"on the command line and the wire)"
        )
    return value


def budget_from_wire(value: int | None, default: Budget) -> Budget:
    """A budget given on the command line or the wire: ``0`` is no budget, ``None`` the default.

    Raises:
        ConfigError: a negative value.
    """
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"budget must be a whole number of characters >= 0 (0 disables it), got {value!r}"
        )
    return value if value > 0 else None


def effective_budget(budget: int | float | None) -> int | None:
    """The budget in whole code points, or ``None`` when it is a no-op.

    ``None``, a number ``<= 0`` and an infinite one are no-ops (the design's rule for the
    low-level finalizer and send guard).

    Raises:
        ConfigError: a positive fraction or other finite float (use an int), NaN, a bool,
            a str or anything else.
    """
    if budget is None:
        return None
    if isinstance(budget, float) and not math.isnan(budget):
        if budget <= 0 or math.isinf(budget):
            return None
    elif isinstance(budget, int) and not isinstance(budget, bool):
        return budget if budget > 0 else None
    raise ConfigError(
        f"budget must be an int of code points, None or math.inf, got {budget!r}; pass "
        f"e.g. budget={DEFAULT_BATCH_BUDGET_CHARS}, or None for no budget"
    )
