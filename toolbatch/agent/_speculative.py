"""Speculative follow-up: run the predicted next prompt ahead, with read-only tools only.

``speculate`` forks the session's history and runs a predicted prompt through a headless
runtime that runs only read-only tools (the others are answered ``skipped``). Its turns are
completed exactly like any other (finalize, hooks, finalize, guard), and recorded into a
pending transcript held by the speculation. If the user's real prompt matches, ``accept``
replays that pending transcript into the session's recorder, in order, and appends the
messages to the session; otherwise the speculation is simply dropped, and nothing of it
was ever recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from toolbatch._core import Part, ToolCall, Turn
from toolbatch.agent._loop import AgentLoop, AgentOutcome, HeadlessRuntime
from toolbatch.agent._messages import Message, Model
from toolbatch.errors import ConfigError
from toolbatch.recorder import Recorder, ResponseKind

__all__ = ["PendingRecorder", "Speculation", "accept", "speculate"]


@dataclass(frozen=True, slots=True)
class _Held:
    turn: Turn | None = None
    kinds: Sequence[ResponseKind] | None = None
    role: Literal["user", "model"] = "user"
    parts: Sequence[Part] = ()
    tool_calls: Sequence[ToolCall] = ()


class PendingRecorder:
    """A ``Recorder`` that holds what it is given, to replay it into another one later."""

    def __init__(self) -> None:
        self._held: list[_Held] = []

    async def record_turn(self, turn: Turn, *, kinds: Sequence[ResponseKind] | None = None) -> None:
        """Hold a completed turn."""
        self._held.append(_Held(turn=turn, kinds=kinds))

    async def record_message(
        self,
        role: Literal["user", "model"],
        parts: Sequence[Part],
        *,
        tool_calls: Sequence[ToolCall] = (),
    ) -> None:
        """Hold a message."""
        self._held.append(_Held(role=role, parts=list(parts), tool_calls=list(tool_calls)))

    async def replay(self, recorder: Recorder) -> None:
        """Record everything held, in order, into ``recorder``."""
        for held in self._held:
            if held.turn is not None:
                await recorder.record_turn(held.turn, kinds=held.kinds)
            else:
                await recorder.record_message(held.role, held.parts, tool_calls=held.tool_calls)


@dataclass(slots=True)
class Speculation:
    """A predicted prompt already run against a fork of the session.

    Attributes:
        prompt: the predicted prompt.
        messages: the messages the fork added (user, model and tool), in order.
        turns: the fork's finalized tool turns, matching its tool messages in order.
        outcome: how the fork's run ended.
        base_length: the session's history length when the fork was taken.
    """

    prompt: str
    messages: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    outcome: AgentOutcome = field(default_factory=AgentOutcome)
    base_length: int = 0
    pending: PendingRecorder = field(default_factory=PendingRecorder)


async def speculate(loop: AgentLoop, prompt: str, *, model: Model | None = None) -> Speculation:
    """Run ``prompt`` ahead on a fork of ``loop``'s history; nothing reaches the transcript."""
    pending = PendingRecorder()
    fork = AgentLoop(
        model if model is not None else loop.model,
        loop.scheduler,
        runtime=HeadlessRuntime(read_only=True),
        recorder=pending,
        max_turns=loop.max_turns,
        history=loop.history,
    )
    outcome = await fork.prompt(prompt)
    base = len(loop.history)
    return Speculation(
        prompt=prompt,
        messages=fork.history[base:],
        turns=outcome.turns,
        outcome=outcome,
        base_length=base,
        pending=pending,
    )


async def accept(loop: AgentLoop, speculation: Speculation) -> AgentOutcome:
    """Adopt a speculation: record what it held and append its messages to the session.

    Raises:
        ConfigError: the session moved on since the speculation was taken.
    """
    if len(loop.history) != speculation.base_length:
        raise ConfigError(
            "the session changed since this speculation was taken; speculate again for "
            "the current history"
        )
    if loop.recorder is not None:
        await speculation.pending.replay(loop.recorder)
    loop.history.extend(speculation.messages)
    return speculation.outcome
