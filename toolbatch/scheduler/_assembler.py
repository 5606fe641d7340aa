"""The turn assembler: "order, finalize, record, send", once, for every runtime boundary.

Every runtime (the scheduler itself, interactive, headless, subagent, speculative, ACP, the
stdio service) collects its tool responses here instead of re-implementing the boundary:

1. ``add`` each response with its ordinal and kind (executed, duplicate, skipped, cancelled,
   synthetic); responses come out in ordinal order, FIFO per call id;
2. ``complete()`` finalizes the whole turn against the budget (persisting at most once),
   optionally runs a post-finalize step (PostToolBatch hooks) and finalizes again, passes
   the flattened parts through the send guard, records the turn (write-ahead), and returns
   the ``Turn`` whose ``parts`` are exactly what was recorded and is to be sent.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from toolbatch._wire import Part, ToolCallResponse, Turn
from toolbatch.artifacts import ArtifactStore
from toolbatch.finalize import (
    DEFAULT_LIFECYCLE_REMINDERS,
    enforce_send_budget,
    finalize_tool_responses,
)
from toolbatch.recorder import Recorder, ResponseKind

__all__ = ["PostFinalizeStep", "TurnAssembler"]

log = structlog.get_logger("toolbatch.assembler")

PostFinalizeStep = Callable[[list[ToolCallResponse]], Awaitable[list[ToolCallResponse]]]
"""A step between the two finalizations (the scheduler runs PostToolBatch hooks here)."""

_UNORDERED: Final = float("inf")


@dataclass(slots=True)
class _Entry:
    ordinal: float
    sequence: int
    response: ToolCallResponse
    kind: ResponseKind


class TurnAssembler:
    """Collects one model turn's tool responses and completes the turn once.

    Args:
        budget: the aggregate budget in code points (``None`` or ``<= 0`` disables).
        store: where cut responses are persisted (``None``: nowhere).
        recorder: where the finalized turn is recorded before it is returned.
        lifecycle_reminders: the protected lifecycle reminder texts per tool name.
        outermost: whether this is the last boundary of the turn (it then logs the turn's
            one summary line at info; an inner boundary logs at debug).
    """

    def __init__(
        self,
        *,
        budget: int | float | None,
        store: ArtifactStore | None = None,
        recorder: Recorder | None = None,
        lifecycle_reminders: Mapping[str, Sequence[str]] = DEFAULT_LIFECYCLE_REMINDERS,
        outermost: bool = True,
    ) -> None:
        self.budget = budget
        self.outermost = outermost
        self.store = store
        self.recorder = recorder
        self.lifecycle_reminders = lifecycle_reminders
        self._entries: list[_Entry] = []
        self._expected: dict[str, deque[int]] = defaultdict(deque)
        self._completed = False

    def expect(self, call_ids: Sequence[str]) -> None:
        """Declare the model's call order, for responses added without an ordinal.

        A response added later without an ordinal takes the earliest unfilled position of
        its call id (first in, first out when the model repeated an id).
        """
        for ordinal, call_id in enumerate(call_ids):
            self._expected[call_id].append(ordinal)

    def add(
        self,
        response: ToolCallResponse,
        *,
        ordinal: int | None = None,
        kind: ResponseKind = "executed",
    ) -> None:
        """Add one response. Without an ordinal (and no expected slot) it goes last."""
        if self._completed:
            raise RuntimeError("this turn is already complete; start a new TurnAssembler")
        position: float
        if ordinal is not None:
            position = ordinal
        elif self._expected.get(response.call_id):
            position = self._expected[response.call_id].popleft()
        else:
            position = _UNORDERED
        self._entries.append(_Entry(position, len(self._entries), response, kind))

    def __len__(self) -> int:
        return len(self._entries)

    def _ordered(self) -> list[_Entry]:
        return sorted(self._entries, key=lambda entry: (entry.ordinal, entry.sequence))

    @property
    def responses(self) -> list[ToolCallResponse]:
        """The responses added so far, in ordinal order."""
        return [entry.response for entry in self._ordered()]

    async def finalize(self, responses: Sequence[ToolCallResponse]) -> list[ToolCallResponse]:
        """One finalization pass over ``responses`` with this turn's budget and store."""
        return await finalize_tool_responses(
            responses,
            budget=self.budget,
            store=self.store,
            lifecycle_reminders=self.lifecycle_reminders,
        )

    async def complete(self, *, post_finalize: PostFinalizeStep | None = None) -> Turn:
        """Finalize, (run ``post_finalize`` and finalize again), guard, record, return."""
        if self._completed:
            raise RuntimeError("complete() was already called for this turn")
        self._completed = True
        ordered = self._ordered()
        kinds = [entry.kind for entry in ordered]
        responses = await self.finalize([entry.response for entry in ordered])
        if post_finalize is not None:
            responses = await self.finalize(await post_finalize(responses))
        responses, parts = self._guard(responses)
        turn = Turn.model_construct(responses=responses, parts=parts)
        if self.recorder is not None:
            await self.recorder.record_turn(turn, kinds=kinds)
        (log.info if self.outermost else log.debug)(
            "turn.completed",
            responses=len(responses),
            chars=sum(r.content_length for r in responses),
            budget=self.budget,
        )
        return turn

    def _guard(
        self, responses: list[ToolCallResponse]
    ) -> tuple[list[ToolCallResponse], list[Part]]:
        """Apply the send guard to the flattened parts, keeping responses consistent."""
        parts: list[Part] = [part for response in responses for part in response.parts]
        guarded = enforce_send_budget(
            parts, self.budget, lifecycle_reminders=self.lifecycle_reminders
        )
        if guarded is parts:
            return responses, parts
        # The guard only rewrites parts in place (same count, same order): split it back.
        rebuilt: list[ToolCallResponse] = []
        offset = 0
        for response in responses:
            own = guarded[offset : offset + len(response.parts)]
            offset += len(response.parts)
            rebuilt.append(response if own == response.parts else response.with_parts(own))
        return rebuilt, guarded
