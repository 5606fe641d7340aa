"""A deterministic model that needs no network, for demos, tests and editors.

Without a script it answers every user prompt the same way: each line that starts with
``$ `` becomes one ``run_shell_command`` call (all lines of one prompt in one batch); after
the batch it answers with a short summary of what the tools returned and ends the turn.
With a script it plays the given steps in order: a list of calls is one batch, a string is
a final answer.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

from toolbatch._core import FunctionResponsePart, ToolCall, ToolDeclaration
from toolbatch.agent._messages import Message, ModelReply, text_of

__all__ = ["COMMAND_PREFIX", "ScriptStep", "ScriptedModel"]

COMMAND_PREFIX: Final = "$ "
SUMMARY_LINE_CHARS: Final = 160

ScriptStep: TypeAlias = str | Sequence[ToolCall | Mapping[str, Any]]
"""A final answer, or one batch of calls (``ToolCall``s or ``{"name", "args", "id"?}``)."""


class ScriptedModel:
    """A model that answers from a script, or turns ``$ `` lines into shell calls.

    Args:
        script: the steps to play, in order; ``None`` for the ``$ `` line behaviour.
        shell_tool: the tool name ``$ `` lines call.
    """

    def __init__(
        self,
        script: Sequence[ScriptStep] | None = None,
        *,
        shell_tool: str = "run_shell_command",
    ) -> None:
        self._script = list(script) if script is not None else None
        self._shell_tool = shell_tool
        self._ids = itertools.count(1)
        self._taken: set[str] = set()

    def _new_id(self) -> str:
        # Never reuse an id already in the history: a resumed session would otherwise
        # answer the new call as a duplicate of a recorded one.
        while (candidate := f"call-{next(self._ids)}") in self._taken:
            pass
        self._taken.add(candidate)
        return candidate

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        """Play the next scripted step, or answer the latest prompt."""
        self._taken.update(call.id for message in history for call in message.tool_calls)
        if self._script is not None:
            return self._next_step()
        if history and history[-1].role == "tool":
            return ModelReply(text=summarize(history[-1]))
        prompt = next((m for m in reversed(history) if m.role == "user"), None)
        commands = [] if prompt is None else commands_in(text_of(prompt.parts))
        if not commands:
            return ModelReply(
                text="Nothing to run: start a line with '$ ' to run it as a shell command."
            )
        calls = [
            ToolCall(id=self._new_id(), name=self._shell_tool, args={"command": c})
            for c in commands
        ]
        return ModelReply(text=f"Running {len(calls)} command(s).", tool_calls=calls)

    def _next_step(self) -> ModelReply:
        assert self._script is not None
        if not self._script:
            return ModelReply(text="Done.")
        step = self._script.pop(0)
        if isinstance(step, str):
            return ModelReply(text=step)
        calls = []
        for item in step:
            if isinstance(item, ToolCall):
                calls.append(item)
            else:
                data = dict(item)
                data.setdefault("id", self._new_id())
                calls.append(ToolCall.model_validate(data))
        return ModelReply(tool_calls=calls)


def commands_in(prompt: str) -> list[str]:
    """The shell commands of a prompt: each line starting with ``$ `` (prefix removed)."""
    commands = []
    for line in prompt.split("\n"):
        stripped = line.strip()
        if stripped.startswith(COMMAND_PREFIX) and stripped[len(COMMAND_PREFIX) :].strip():
            commands.append(stripped[len(COMMAND_PREFIX) :].strip())
    return commands


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().split("\n") if line.strip()]
    last = lines[-1] if lines else "(no output)"
    return last if len(last) <= SUMMARY_LINE_CHARS else last[: SUMMARY_LINE_CHARS - 1] + "…"


def summarize(tool_message: Message) -> str:
    """A short summary of a finalized tool batch, as the model received it."""
    lines = []
    for part in tool_message.parts:
        if not isinstance(part, FunctionResponsePart):
            continue
        response = part.function_response.response
        error = response.get("error")
        output = response.get("output")
        if isinstance(error, str):
            detail = f"failed: {_last_line(error)}"
        elif isinstance(output, str):
            detail = _last_line(output)
        else:
            detail = _last_line(json.dumps(output, ensure_ascii=False))
        lines.append(f"- {part.function_response.name} [{part.function_response.id}]: {detail}")
    if not lines:
        return "The tools returned nothing."
    return f"{len(lines)} tool call(s) finished:\n" + "\n".join(lines)
