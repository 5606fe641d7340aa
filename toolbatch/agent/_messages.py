"""The conversation an agent loop keeps, and the model interface it drives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from toolbatch._core import Part, TextPart, ToolCall, ToolDeclaration

__all__ = ["Message", "Model", "ModelReply", "Role", "text_of"]

Role: TypeAlias = Literal["user", "model", "tool"]


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the history a model sees.

    Attributes:
        role: ``user`` (the user's prompt), ``model`` (the model's answer and the calls it
            made) or ``tool`` (a finalized batch of tool responses: exactly the parts that
            were recorded and sent).
        parts: the message's parts.
        tool_calls: for a ``model`` message, the calls it made, in its order.
    """

    role: Role
    parts: list[Part]
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What a model answered: text, and the tool calls to run (empty ends the turn).

    Attributes:
        text: the model's words to the user.
        tool_calls: the calls to run, in the model's order.
        invalid_calls: call id to a reason, for calls the model client could not parse
            (bad JSON arguments, say); the runtime answers them with an error response
            instead of running them.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    invalid_calls: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """A model client: given the history and the tools, answer one turn."""

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        """The model's next reply."""
        ...


def text_of(parts: Sequence[Part]) -> str:
    """The concatenated top-level text of ``parts``."""
    return "".join(part.text for part in parts if isinstance(part, TextPart))
