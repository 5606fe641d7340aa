"""Speculative follow-up: run the predicted next prompt ahead, with read-only tools only.

``speculate`` forks the session's history and runs a predicted prompt through a headless
runtime that runs only read-only tools (the others are answered ``skipped``). Each of its
tool turns is finalized before it enters the speculative history, and nothing is recorded.
If the user's real prompt matches, ``accept`` records the speculative messages and turns,
in order, and appends them to the session; otherwise the speculation is simply dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolbatch._wire import Turn
from toolbatch.agent._loop import AgentLoop, AgentOutcome, HeadlessRuntime
from toolbatch.agent._messages import Message, Model
from toolbatch.recorder import response_kind

__all__ = ["Speculation", "accept", "speculate"]


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


async def speculate(loop: AgentLoop, prompt: str, *, model: Model | None = None) -> Speculation:
    """Run ``prompt`` ahead on a fork of ``loop``'s history; nothing is recorded."""
    fork = AgentLoop(
        model if model is not None else loop.model,
        loop.scheduler,
        runtime=HeadlessRuntime(read_only=True),
        recorder=None,
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
    )


async def accept(loop: AgentLoop, speculation: Speculation) -> AgentOutcome:
    """Adopt a speculation: record its messages and turns and append them to the session.

    Raises:
        ValueError: the session moved on since the speculation was taken.
    """
    if len(loop.history) != speculation.base_length:
        raise ValueError(
            "the session changed since this speculation was taken; speculate again for "
            "the current history"
        )
    turns = iter(speculation.turns)
    for message in speculation.messages:
        if message.role == "tool":
            turn = next(turns)
            if loop.recorder is not None:
                await loop.recorder.record_turn(
                    turn, kinds=[response_kind(r) for r in turn.responses]
                )
        elif loop.recorder is not None:
            await loop.recorder.record_message(
                "model" if message.role == "model" else "user",
                message.parts,
                tool_calls=message.tool_calls,
            )
        loop.history.append(message)
    return speculation.outcome
