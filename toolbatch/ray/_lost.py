"""What the driver answers when a session's host is gone.

Every call of a batch whose host died (the actor or its node) is answered here with one
``session_lost`` error response, in call order: nothing is retried (a tool may have run: at
most once), nothing is lost or duplicated. A turn whose host died before its completion is
bounded here, with no store: the host's responses are answered ``session_lost`` (their
output was never bounded), the ones the runtime made itself are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from toolbatch._core import ToolCall, ToolCallResponse, Turn
from toolbatch.finalize import Budget, finalize_tool_responses
from toolbatch.ray._codec import stand_in_call

__all__ = ["LOST_ERROR_TYPE", "lost_responses", "lost_turn"]

LOST_ERROR_TYPE: Final = "session_lost"
"""The ``error_type`` of responses to calls whose session host was lost."""


def lost_responses(
    session_id: str, reason: str | None, entries: Sequence[Any], *, ran: bool
) -> tuple[list[ToolCall], list[ToolCallResponse]]:
    """The calls of ``entries`` in the model's order, and a ``session_lost`` response to each.

    Args:
        session_id: the session whose host was lost.
        reason: why it was lost.
        entries: the batch as given.
        ran: whether the batch reached the host (its calls may have run).
    """
    calls = [stand_in_call(raw, index) for index, raw in enumerate(entries)]
    if ran:
        message = (
            f"the session host of {session_id!r} was lost during this batch "
            f"({reason}); the call may or may not have run, and it was not "
            f"run again; its workspace and processes are gone"
        )
    else:
        message = (
            f"the session host of {session_id!r} was lost earlier ({reason}); the call was not run"
        )
    ordered = sorted(
        enumerate(calls),
        key=lambda item: item[1].ordinal if item[1].ordinal is not None else item[0],
    )
    sorted_calls = [call for _, call in ordered]
    responses = [
        ToolCallResponse.failed(call, message, error_type=LOST_ERROR_TYPE) for call in sorted_calls
    ]
    return sorted_calls, responses


async def lost_turn(
    session_id: str,
    reason: str | None,
    responses: Sequence[ToolCallResponse],
    from_host: Sequence[bool],
    *,
    budget: Budget,
    lifecycle_tools: Iterable[str],
) -> Turn:
    """The turn of a batch whose host is gone, bounded here (there is nothing to persist).

    Args:
        session_id: the session whose host was lost.
        reason: why it was lost.
        responses: the turn's responses, in order.
        from_host: for each response, whether the host made it (its output is there).
        budget: the turn's budget.
        lifecycle_tools: the config's lifecycle tools, as the finalizer takes them.
    """
    answered: list[ToolCallResponse] = []
    for response, hosted in zip(responses, from_host, strict=True):
        if not hosted or response.error_type == LOST_ERROR_TYPE:
            answered.append(response)
            continue
        call = ToolCall(id=response.call_id, name=response.name, args=response.call_args or {})
        message = (
            f"the session host of {session_id!r} was lost before this turn was "
            f"completed ({reason}); the call ran, but its result could not be "
            f"bounded on its host and is not sent"
        )
        answered.append(ToolCallResponse.failed(call, message, error_type=LOST_ERROR_TYPE))
    finalized = await finalize_tool_responses(
        answered, budget=budget, store=None, lifecycle_tools=lifecycle_tools
    )
    parts = [part for response in finalized for part in response.parts]
    return Turn(responses=finalized, parts=parts, stop_reason=None)
