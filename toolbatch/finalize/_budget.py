"""The aggregate budget option: its default, its validation and when it is disabled."""

from __future__ import annotations

import math
from typing import Final

from toolbatch.errors import ConfigError

__all__ = ["DEFAULT_BATCH_BUDGET_CHARS", "effective_budget"]

DEFAULT_BATCH_BUDGET_CHARS: Final = 200_000
"""The budget runtimes use by default: code points of model-facing tool text per batch."""


def effective_budget(budget: int | float | None) -> int | None:
    """The budget in whole code points, or ``None`` when budgeting is disabled.

    ``None``, a budget ``<= 0`` and an infinite budget disable it; a finite positive float
    is rounded down (so ``0.5`` is a budget of 0: every slot is emptied).

    Raises:
        ConfigError: the budget is not an int, a float or ``None`` (a bool or a str
            included), or it is NaN.
    """
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        raise ConfigError(
            f"budget must be an int, a float or None (code points of tool output per batch), "
            f"got {budget!r}; pass e.g. budget={DEFAULT_BATCH_BUDGET_CHARS}, or None to disable"
        )
    if isinstance(budget, float):
        if math.isnan(budget):
            raise ConfigError(
                f"budget must be a number of code points, got {budget!r}; pass e.g. "
                f"budget={DEFAULT_BATCH_BUDGET_CHARS}, or None to disable"
            )
        if math.isinf(budget) or budget <= 0:
            return None
        return math.floor(budget)
    return budget if budget > 0 else None
