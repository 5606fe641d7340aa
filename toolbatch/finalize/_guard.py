"""The send guard: a last-chance, no-I/O cap on one tool-response message at the send boundary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import structlog

from toolbatch._core import FunctionResponsePart, Part, TextPart
from toolbatch.finalize._budget import effective_budget
from toolbatch.finalize._lifecycle import DEFAULT_LIFECYCLE_TOOLS, check_lifecycle_tools
from toolbatch.finalize._slots import (
    collect_slots,
    cut_slots,
    fit_slot,
    measure_slots,
    rebuild_parts,
)

__all__ = ["enforce_send_budget"]

log = structlog.get_logger("toolbatch.finalize")


def enforce_send_budget(
    parts: Sequence[Part],
    budget: int | float | None,
    *,
    lifecycle_tools: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS,
) -> list[Part]:
    """Cap the model-facing text of one tool-response message (one batch's parts) to ``budget``.

    The same measure, allocation and fitting as the finalizer (function-response values
    and the batch's top-level text), without persistence or artifact paths; a successful
    response of a lifecycle tool stays inline. A batch that went through
    :func:`finalize_tool_responses` already fits, so this is normally a no-op and returns
    the very list it was given; when it has to cut, it logs a warning. A budget that is
    ``None``, ``<= 0`` or infinite is a no-op.

    Raises:
        ConfigError: ``budget`` or ``lifecycle_tools`` is invalid.
    """
    limit = effective_budget(budget)
    lifecycle = check_lifecycle_tools(lifecycle_tools)
    same = parts if isinstance(parts, list) else list(parts)
    if limit is None:
        return same
    before = _plain_length(same, lifecycle)
    if before is None:
        texts: list[str] = []
        measure_slots(same, texts, [], include_top_level_text=True, lifecycle=lifecycle)
        before = sum(map(len, texts))
    if before <= limit:
        return same  # the usual case: measured as plain lists, no slot records
    slots = collect_slots(same, owner=0, include_top_level_text=True, lifecycle=lifecycle)
    fits = [(slot, fit_slot(slot, allocation)) for slot, allocation in cut_slots(slots, limit)]
    after = before - sum(len(slot.text) - len(fitted.text) for slot, fitted in fits)
    log.warning(
        "finalize.send_guard_reduced",
        parts=len(same),
        slots_cut=len(fits),
        budget=limit,
        before=before,
        after=after,
    )
    return rebuild_parts(same, fits)


def _plain_length(parts: list[Part], lifecycle: frozenset[str]) -> int | None:
    """The budgeted length of parts that are all text or function responses holding only a
    string ``output`` (a completed turn's, almost always), read without slot lists;
    ``None`` for any other batch (:func:`measure_slots` states the rule)."""
    total = 0
    for part in parts:
        if type(part) is FunctionResponsePart:
            function_response = part.function_response
            body = function_response.response
            if len(body) != 1 or type(output := body.get("output")) is not str:
                return None
            if function_response.name not in lifecycle:
                total += len(output)
        elif type(part) is TextPart:
            total += len(part.text)
        else:
            return None
    return total
