"""The agent loop and its runtimes: model turns, tool turns, one boundary each.

``AgentLoop`` asks the model, runs the calls it makes through a runtime, and feeds the
finalized parts back, until the model answers without calls. Every runtime collects one
turn's responses in a ``TurnAssembler`` (order, finalize, guard, record) and never
re-implements that boundary:

* ``HeadlessRuntime`` collects the whole turn (executed, duplicate, skipped, cancelled and
  synthetic responses) by ordinal and finalizes once before recording and submission.
* ``InteractiveRuntime`` asks the user before tools that need permission and merges the
  executed, duplicate and synthetic responses FIFO per call id in the model's order, then
  finalizes once; a turn the user cancelled entirely is recorded but not sent.

The model-send guard sits in ``AgentLoop``: every outgoing tool message passes through
``enforce_send_budget`` (no I/O), which is a no-op unless a caller bypassed the assembler.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias

import anyio
import structlog

from toolbatch._wire import FunctionResponsePart, Part, TextPart, ToolCall, ToolCallResponse, Turn
from toolbatch.agent._messages import Message, Model, ModelReply
from toolbatch.finalize import enforce_send_budget
from toolbatch.recorder import JsonlRecorder, ResponseKind, load_session, response_kind
from toolbatch.scheduler import ApprovalCallback, BatchObserver, ToolScheduler, TurnAssembler

__all__ = [
    "AgentLoop",
    "AgentOutcome",
    "HeadlessRuntime",
    "InteractiveRuntime",
    "Runtime",
    "StopReason",
    "history_from_transcript",
]

log = structlog.get_logger("toolbatch.agent")

DEFAULT_MAX_TURNS: Final = 25
StopReason: TypeAlias = Literal["end_turn", "max_turns", "cancelled"]


@dataclass(slots=True)
class AgentOutcome:
    """How one prompt ended.

    Attributes:
        text: the model's final words.
        stop_reason: ``end_turn`` (the model answered without calls), ``max_turns`` or
            ``cancelled`` (the user aborted).
        turns: the finalized tool turns of this prompt, in order (what the model received).
        replies: the model's replies of this prompt, in order.
    """

    text: str = ""
    stop_reason: StopReason = "end_turn"
    turns: list[Turn] = field(default_factory=list)
    replies: list[ModelReply] = field(default_factory=list)


class Runtime(Protocol):
    """How a tool turn is executed and collected (one of the runtimes below)."""

    async def run_tool_turn(
        self,
        loop: AgentLoop,
        reply: ModelReply,
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
    ) -> tuple[Turn, bool]:
        """Run ``reply``'s calls; return the finalized turn and whether to send it."""
        ...


def _duplicate(call: ToolCall) -> ToolCallResponse:
    return ToolCallResponse.failed(
        call,
        f"tool call id {call.id!r} was already answered; it was not run again",
        status="duplicate",
        error_type="duplicate_call",
    )


def _skipped(call: ToolCall, reason: str) -> ToolCallResponse:
    return ToolCallResponse.failed(call, reason, status="skipped", error_type="skipped")


def _invalid(call: ToolCall, reason: str) -> ToolCallResponse:
    return ToolCallResponse.failed(
        call, f"invalid tool call {call.name!r}: {reason}", error_type="invalid_args"
    )


@dataclass(slots=True)
class _TurnPlan:
    """A model turn's calls sorted into what runs and what is answered in place."""

    executable: list[ToolCall] = field(default_factory=list)
    answered: list[tuple[int, ToolCallResponse, ResponseKind]] = field(default_factory=list)


def _plan_turn(
    loop: AgentLoop,
    reply: ModelReply,
    *,
    max_calls: int | None,
    read_only: bool = False,
) -> _TurnPlan:
    plan = _TurnPlan()
    seen = loop.answered_call_ids()
    for ordinal, call in enumerate(reply.tool_calls):
        if call.id in reply.invalid_calls:
            plan.answered.append(
                (ordinal, _invalid(call, reply.invalid_calls[call.id]), "synthetic")
            )
        elif call.id in seen:
            plan.answered.append((ordinal, _duplicate(call), "duplicate"))
        elif max_calls is not None and len(plan.executable) >= max_calls:
            reason = f"skipped: at most {max_calls} tool calls run per turn; ask again for the rest"
            plan.answered.append((ordinal, _skipped(call, reason), "skipped"))
        elif read_only and not loop.is_read_only(call.name):
            reason = f"skipped: {call.name!r} may change things and is not run speculatively"
            plan.answered.append((ordinal, _skipped(call, reason), "skipped"))
        else:
            plan.executable.append(call.model_copy(update={"ordinal": ordinal}))
        seen.add(call.id)
    return plan


@dataclass(frozen=True, slots=True)
class HeadlessRuntime:
    """Runs every call of a turn through the scheduler and finalizes the turn once.

    Args:
        max_calls_per_turn: calls beyond this many in one turn are answered ``skipped``.
        read_only: run only read-only tools; the others are answered ``skipped`` (used
            for speculative runs).
    """

    max_calls_per_turn: int | None = None
    read_only: bool = False

    async def run_tool_turn(
        self,
        loop: AgentLoop,
        reply: ModelReply,
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
    ) -> tuple[Turn, bool]:
        """Collect the whole turn by ordinal, finalize once, record, send."""
        plan = _plan_turn(loop, reply, max_calls=self.max_calls_per_turn, read_only=self.read_only)
        assembler = loop.new_assembler()
        for ordinal, response, kind in plan.answered:
            assembler.add(response, ordinal=ordinal, kind=kind)
        if plan.executable:
            executed = await loop.scheduler.run_batch(
                plan.executable, abort=abort, observer=observer, record=False
            )
            for call, response in zip(plan.executable, executed.responses, strict=True):
                assembler.add(response, ordinal=call.ordinal, kind=response_kind(response))
        turn = await assembler.complete()
        return turn, True


@dataclass(frozen=True, slots=True)
class InteractiveRuntime:
    """Asks before tools that need permission; merges responses FIFO per call id.

    Args:
        approve: asked before a tool whose declaration needs permission; ``False``
            becomes an error response the model sees. ``None`` allows everything.
    """

    approve: ApprovalCallback | None = None

    async def run_tool_turn(
        self,
        loop: AgentLoop,
        reply: ModelReply,
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
    ) -> tuple[Turn, bool]:
        """Execute, merge executable/duplicate/synthetic responses in call order, finalize."""
        plan = _plan_turn(loop, reply, max_calls=None)
        assembler = loop.new_assembler()
        assembler.expect([call.id for call in reply.tool_calls])
        executed: list[ToolCallResponse] = []
        if plan.executable:
            batch = await loop.scheduler.run_batch(
                plan.executable,
                abort=abort,
                observer=observer,
                approve=self.approve,
                record=False,
            )
            executed = batch.responses
        # Responses arrive without ordinals, as a UI receives them; the assembler places
        # each at the earliest unfilled position of its call id.
        for response in executed:
            assembler.add(response, kind=response_kind(response))
        for _, response, kind in plan.answered:
            assembler.add(response, kind=kind)
        turn = await assembler.complete()
        everything_cancelled = bool(turn.responses) and all(
            r.status == "cancelled" for r in turn.responses
        )
        return turn, not everything_cancelled


def history_from_transcript(path: str | os.PathLike[str]) -> list[Message]:
    """The conversation recorded in a transcript, ready to resume."""
    history: list[Message] = []
    for entry in load_session(path):
        if entry.type == "message":
            role = entry.role or "user"
            history.append(Message(role=role, parts=entry.parts, tool_calls=entry.tool_calls))
        else:
            history.append(Message(role="tool", parts=entry.parts))
    return history


class AgentLoop:
    """Drives a model and a scheduler through one session.

    Args:
        model: the model client.
        scheduler: an open ``ToolScheduler`` (without its own recorder: the loop records
            at its outer boundary).
        runtime: how tool turns are run (default ``HeadlessRuntime()``).
        recorder: where messages and finalized tool turns are recorded, write-ahead.
        max_turns: model turns per prompt before the loop stops.
        history: a conversation to continue (see ``history_from_transcript``).
    """

    def __init__(
        self,
        model: Model,
        scheduler: ToolScheduler,
        *,
        runtime: Runtime | None = None,
        recorder: JsonlRecorder | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        history: Sequence[Message] = (),
    ) -> None:
        if scheduler.config.recorder is not None:
            raise ValueError(
                "the scheduler has its own recorder; give the recorder to AgentLoop instead, "
                "so each turn is recorded once at the loop's boundary"
            )
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an int >= 1, got {max_turns!r}")
        self.model = model
        self.scheduler = scheduler
        self.runtime: Runtime = runtime if runtime is not None else HeadlessRuntime()
        self.recorder = recorder
        self.max_turns = max_turns
        self.history: list[Message] = list(history)

    def new_assembler(self, *, record: bool = True) -> TurnAssembler:
        """A turn assembler with this session's budget, store and recorder."""
        config = self.scheduler.config
        return TurnAssembler(
            budget=config.batch_budget,
            store=self.scheduler.store,
            recorder=self.recorder if record else None,
            lifecycle_reminders=config.lifecycle_reminders,
        )

    def answered_call_ids(self) -> set[str]:
        """Ids of every call already answered in this session's history."""
        return {
            part.function_response.id
            for message in self.history
            if message.role == "tool"
            for part in message.parts
            if isinstance(part, FunctionResponsePart)
        }

    def is_read_only(self, tool_name: str) -> bool:
        """Whether ``tool_name`` is declared read-only in this session."""
        producer = self.scheduler.producer(tool_name)
        return producer is not None and producer.declaration.read_only

    async def _remember(self, message: Message) -> None:
        if self.recorder is not None and message.role != "tool":
            await self.recorder.record_message(
                "model" if message.role == "model" else "user",
                message.parts,
                tool_calls=message.tool_calls,
            )
        self.history.append(message)

    def _outgoing(self) -> list[Message]:
        """The history to send, the last tool message passed through the send guard."""
        if not self.history or self.history[-1].role != "tool":
            return self.history
        last = self.history[-1]
        config = self.scheduler.config
        guarded = enforce_send_budget(
            last.parts, config.batch_budget, lifecycle_reminders=config.lifecycle_reminders
        )
        if guarded is last.parts:
            return self.history
        return [*self.history[:-1], Message(role="tool", parts=guarded)]

    async def prompt(
        self,
        text: str | None,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
    ) -> AgentOutcome:
        """Run one user prompt to the end (``None`` continues a resumed session)."""
        outcome = AgentOutcome()
        if text is not None:
            await self._remember(Message(role="user", parts=[TextPart(text=text)]))
        for _ in range(self.max_turns):
            if abort is not None and abort.is_set():
                outcome.stop_reason = "cancelled"
                return outcome
            reply = await self.model.respond(self._outgoing(), self.scheduler.declarations())
            outcome.replies.append(reply)
            outcome.text = reply.text
            parts: list[Part] = [TextPart(text=reply.text)] if reply.text else []
            await self._remember(Message(role="model", parts=parts, tool_calls=reply.tool_calls))
            if not reply.tool_calls:
                return outcome
            turn, send = await self.runtime.run_tool_turn(
                self, reply, abort=abort, observer=observer
            )
            outcome.turns.append(turn)
            self.history.append(Message(role="tool", parts=turn.parts))
            if not send or (abort is not None and abort.is_set()):
                outcome.stop_reason = "cancelled"
                return outcome
        outcome.stop_reason = "max_turns"
        log.warning("agent.max_turns", max_turns=self.max_turns)
        return outcome
