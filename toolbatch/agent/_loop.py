"""The agent loop and its runtimes: model turns, tool turns, one completion each.

``AgentLoop`` asks the model, runs the calls it makes through a runtime, and feeds the
completed turn's parts back, until the model answers without calls (or a hook stops it).
Every runtime does the same two steps: it answers in place what it will not run
(duplicates of calls already answered, calls over a per-turn limit, calls a speculative
run may not make), ``execute``s the rest, merges everything in the model's call order and
completes the turn once with ``ToolScheduler.complete_turn`` (finalize, hooks, finalize,
send guard, record). It never re-implements a step of completion.

* ``HeadlessRuntime`` runs every call it may.
* ``InteractiveRuntime`` asks the user (``approve``) before tools that need permission; a
  turn the user cancelled entirely is recorded but not sent.

The model-send guard sits in ``AgentLoop``: every tool message of each outgoing request
passes through ``enforce_send_budget`` (no I/O), a no-op for completed turns.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeAlias

import anyio
import structlog

from toolbatch._core import FunctionResponsePart, Part, TextPart, ToolCall, ToolCallResponse, Turn
from toolbatch.agent._messages import Message, Model, ModelReply
from toolbatch.errors import ConfigError, RecorderError
from toolbatch.finalize import Budget, enforce_send_budget
from toolbatch.producers import ToolDeclaration
from toolbatch.recorder import Recorder, load_session, response_kind
from toolbatch.scheduler import (
    ApprovalCallback,
    BatchObserver,
    PendingTurn,
    SchedulerConfig,
    UseConfig,
)

__all__ = [
    "AgentLoop",
    "AgentOutcome",
    "HeadlessRuntime",
    "InteractiveRuntime",
    "Runtime",
    "SchedulerLike",
    "StopReason",
    "history_from_transcript",
]

log = structlog.get_logger("toolbatch.agent")

DEFAULT_MAX_TURNS: Final = 25
StopReason: TypeAlias = Literal["end_turn", "max_turns", "cancelled", "hook_stop"]


class SchedulerLike(Protocol):
    """What an agent loop needs of a scheduler: an open :class:`ToolScheduler`, or a remote
    session's handle (``toolbatch.ray.SessionHandle``) with the same surface."""

    @property
    def config(self) -> SchedulerConfig: ...

    def declarations(self) -> list[ToolDeclaration]: ...

    def wait_for_tools(self) -> Awaitable[list[ToolDeclaration]]: ...

    def execute(
        self,
        calls: Sequence[ToolCall],
        /,
        *,
        abort: anyio.Event | None = ...,
        observer: BatchObserver | None = ...,
        approve: ApprovalCallback | None = ...,
    ) -> Awaitable[PendingTurn]: ...

    def complete_turn(
        self,
        pending: PendingTurn | Sequence[ToolCallResponse],
        /,
        *,
        budget: Budget | float | UseConfig = ...,
        recorder: Recorder | UseConfig | None = ...,
    ) -> Awaitable[Turn]: ...


if TYPE_CHECKING:
    from toolbatch.scheduler import ToolScheduler

    def _a_tool_scheduler_is_scheduler_like(scheduler: ToolScheduler) -> SchedulerLike:
        return scheduler  # mypy checks the structural match


@dataclass(slots=True)
class AgentOutcome:
    """How one prompt ended.

    Attributes:
        text: the model's final words.
        stop_reason: ``end_turn`` (the model answered without calls), ``max_turns``,
            ``cancelled`` (the user aborted) or ``hook_stop`` (a PostToolBatch hook stopped
            the agent after a turn; that turn was recorded and is in the history, and the
            model was not asked again).
        turns: the completed tool turns of this prompt, in order (what the model received).
        replies: the model's replies of this prompt, in order.
        hook_reason: with ``hook_stop``, the reason the hook gave.
    """

    text: str = ""
    stop_reason: StopReason = "end_turn"
    turns: list[Turn] = field(default_factory=list)
    replies: list[ModelReply] = field(default_factory=list)
    hook_reason: str | None = None


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


@dataclass(slots=True)
class _TurnPlan:
    """A model turn's calls sorted into what is executed and what is answered in place."""

    executable: list[ToolCall] = field(default_factory=list)
    answered: list[tuple[int, ToolCall, ToolCallResponse]] = field(default_factory=list)


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
        reason = reply.invalid_calls.get(call.id)
        update: dict[str, object] = {"ordinal": ordinal}
        if reason is not None and call.invalid is None:
            update["invalid"] = reason
        call = call.model_copy(update=update)
        if call.invalid is not None:
            plan.executable.append(call)  # answered in place by execute, never run
        elif call.id in seen:
            plan.answered.append((ordinal, call, _duplicate(call)))
        elif max_calls is not None and len(plan.executable) >= max_calls:
            why = f"skipped: at most {max_calls} tool calls run per turn; ask again for the rest"
            plan.answered.append((ordinal, call, _skipped(call, why)))
        elif read_only and not loop.is_read_only(call.name):
            why = f"skipped: {call.name!r} may change things and is not run speculatively"
            plan.answered.append((ordinal, call, _skipped(call, why)))
        else:
            plan.executable.append(call)
        seen.add(call.id)
    return plan


async def _run_planned(
    loop: AgentLoop,
    plan: _TurnPlan,
    *,
    abort: anyio.Event | None,
    observer: BatchObserver | None,
    approve: ApprovalCallback | None,
) -> Turn:
    """Execute the executable calls, merge in call order, complete the turn once."""
    for _, call, response in plan.answered:
        _report(observer, call, response)
    if plan.executable:
        pending = await loop.scheduler.execute(
            plan.executable, abort=abort, observer=observer, approve=approve
        )
    else:
        pending = PendingTurn()
    for ordinal, _, response in plan.answered:
        pending.add(response, ordinal=ordinal)
    return await loop.complete_turn(pending)


def _report(observer: BatchObserver | None, call: ToolCall, response: ToolCallResponse) -> None:
    """Report a call the runtime answered itself, as ``execute`` reports its own."""
    for name, args in (("call_started", (call,)), ("call_finished", (call, response))):
        method = getattr(observer, name, None)
        if method is None:
            continue
        try:
            method(*args)
        except Exception as exc:  # an observer never breaks the turn
            log.warning("agent.observer_failed", error=f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True, slots=True)
class HeadlessRuntime:
    """Runs every call of a turn it may and completes the turn once.

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
        """Answer in place, execute the rest, merge in call order, complete once."""
        plan = _plan_turn(loop, reply, max_calls=self.max_calls_per_turn, read_only=self.read_only)
        turn = await _run_planned(loop, plan, abort=abort, observer=observer, approve=None)
        return turn, True


@dataclass(frozen=True, slots=True)
class InteractiveRuntime:
    """Asks before tools that need permission; completes the turn once.

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
        """Like ``HeadlessRuntime``; a turn whose calls were all cancelled is not sent."""
        plan = _plan_turn(loop, reply, max_calls=None)
        turn = await _run_planned(loop, plan, abort=abort, observer=observer, approve=self.approve)
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
        scheduler: an open ``ToolScheduler`` (or anything :class:`SchedulerLike`, such as a
            ``toolbatch.ray`` session).
        runtime: how tool turns are run (default ``HeadlessRuntime()``).
        recorder: where messages and completed tool turns are recorded, write-ahead
            (default: the scheduler's configured recorder).
        max_turns: model turns per prompt before the loop stops.
        history: a conversation to continue (see ``history_from_transcript``).
    """

    def __init__(
        self,
        model: Model,
        scheduler: SchedulerLike,
        *,
        runtime: Runtime | None = None,
        recorder: Recorder | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        history: Sequence[Message] = (),
    ) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns must be an int >= 1, got {max_turns!r}")
        self.model = model
        self.scheduler = scheduler
        self.runtime: Runtime = runtime if runtime is not None else HeadlessRuntime()
        self.recorder: Recorder | None = (
            recorder if recorder is not None else scheduler.config.recorder
        )
        self.max_turns = max_turns
        self.history: list[Message] = list(history)
        # A completed turn is guarded by its completion; a message that came from elsewhere
        # (the history passed in, or appended to ``history`` directly) is guarded once,
        # before it is first sent. Messages before this index are known to be sendable.
        self._sendable_upto = 0
        self._unrecorded: Turn | None = None
        """A tool turn in the history whose record failed: recorded before the next send."""

    async def complete_turn(self, pending: PendingTurn) -> Turn:
        """Complete one tool turn of this session, recorded in this loop's transcript."""
        return await self.scheduler.complete_turn(pending, recorder=self.recorder)

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
        return any(
            declaration.name == tool_name and declaration.read_only
            for declaration in self.scheduler.declarations()
        )

    async def _remember(self, message: Message) -> None:
        if self.recorder is not None and message.role != "tool":
            await self.recorder.record_message(
                "model" if message.role == "model" else "user",
                message.parts,
                tool_calls=message.tool_calls,
            )
        self._append(message)

    async def _record_unrecorded(self) -> None:
        """Record the tool turn whose record failed, before the conversation goes on."""
        turn = self._unrecorded
        if turn is None:
            return
        if self.recorder is not None:
            kinds = [response_kind(response) for response in turn.responses]
            await self.recorder.record_turn(turn, kinds=kinds)
        self._unrecorded = None

    def _append(self, message: Message) -> None:
        """Add a message the loop made (its own turn: already guarded by its completion)."""
        known = self._sendable_upto == len(self.history)
        self.history.append(message)
        if known:
            self._sendable_upto = len(self.history)

    def _sendable(self) -> list[Message]:
        """The history to send: each message from elsewhere passed through the send guard."""
        history = self.history
        for index in range(self._sendable_upto, len(history)):
            history[index] = self._guard(history[index])
        self._sendable_upto = len(history)
        return history

    def _guard(self, message: Message) -> Message:
        """``message`` as it may be sent: a tool message passed through the send guard."""
        if message.role != "tool":
            return message
        config = self.scheduler.config
        guarded = enforce_send_budget(
            message.parts, config.budget, lifecycle_tools=config.lifecycle
        )
        return message if guarded is message.parts else Message(role="tool", parts=guarded)

    async def prompt(
        self,
        text: str | None,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
    ) -> AgentOutcome:
        """Run one user prompt to the end (``None`` continues a resumed session).

        Raises:
            RecorderError: a turn could not be recorded. Its calls stay answered in
                ``history`` (the completed turn), and that turn is recorded first thing
                on the next prompt, before anything is sent to the model.
        """
        outcome = AgentOutcome()
        await self._record_unrecorded()
        if text is not None:
            await self._remember(Message(role="user", parts=[TextPart(text=text)]))
        for _ in range(self.max_turns):
            if abort is not None and abort.is_set():
                outcome.stop_reason = "cancelled"
                return outcome
            # MCP servers start in the background: the model's list waits for them.
            tools = await self.scheduler.wait_for_tools()
            reply = await self.model.respond(self._sendable(), tools)
            outcome.replies.append(reply)
            outcome.text = reply.text
            parts: list[Part] = [TextPart(text=reply.text)] if reply.text else []
            await self._remember(Message(role="model", parts=parts, tool_calls=reply.tool_calls))
            if not reply.tool_calls:
                return outcome
            try:
                turn, send = await self.runtime.run_tool_turn(
                    self, reply, abort=abort, observer=observer
                )
            except RecorderError as exc:
                if isinstance(exc.turn, Turn):
                    # The calls ran and were answered: the history keeps their answers, so
                    # the model's calls never stand unanswered; the turn is recorded before
                    # anything else is sent (write-ahead), or the next prompt raises again.
                    self._append(Message(role="tool", parts=exc.turn.parts))
                    self._unrecorded = exc.turn
                raise
            outcome.turns.append(turn)
            self._append(Message(role="tool", parts=turn.parts))
            if not send or (abort is not None and abort.is_set()):
                outcome.stop_reason = "cancelled"
                return outcome
            if turn.stop_reason is not None:
                outcome.stop_reason = "hook_stop"
                outcome.hook_reason = turn.stop_reason
                log.info("agent.hook_stop", reason=turn.stop_reason)
                return outcome
        outcome.stop_reason = "max_turns"
        log.warning("agent.max_turns", max_turns=self.max_turns)
        return outcome
