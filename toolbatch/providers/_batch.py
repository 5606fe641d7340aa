"""A turn's parts grouped the way every model API needs them: calls, their media, batch text.

The grouping reads the parts alone, so a live ``Turn`` and the parts of a resumed tool
message map identically: each ``functionResponse`` part starts a call; ``inlineData`` and
``fileData`` parts belong to the call before them (media before any call belong to the
batch); every top-level ``text`` part is batch text (hook context, the stop reason).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

from pydantic import JsonValue

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolDeclaration,
    Turn,
)

__all__ = [
    "Batch",
    "CallResult",
    "HasDeclarations",
    "MediaPart",
    "Source",
    "declarations_of",
    "group",
    "parts_of",
    "response_text",
]

MediaPart: TypeAlias = InlineDataPart | FileDataPart
Source: TypeAlias = Turn | Sequence[Part]
"""A finalized turn, or the parts of a tool message (a resumed history has only parts)."""


@dataclass(frozen=True, slots=True)
class CallResult:
    """One function response and the media that follow it."""

    call_id: str
    name: str
    response: Mapping[str, JsonValue]
    media: list[MediaPart] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        """Whether the response carries an error (failed, cancelled, duplicate, skipped...)."""
        return self.response.get("error") is not None


@dataclass(frozen=True, slots=True)
class Batch:
    """A turn as calls in order, plus the batch's own text and stray media, in order."""

    calls: list[CallResult]
    extras: list[TextPart | MediaPart]


def parts_of(source: Source) -> Sequence[Part]:
    """The parts of a turn, or the parts given."""
    return source.parts if isinstance(source, Turn) else source


def group(source: Source) -> Batch:
    """The calls and batch-level parts of a turn or of a tool message's parts.

    Raises:
        TypeError: an element is not a toolbatch part.
    """
    parts = parts_of(source)
    calls: list[CallResult] = []
    extras: list[TextPart | MediaPart] = []
    for part in parts:
        if isinstance(part, FunctionResponsePart):
            body = part.function_response
            calls.append(CallResult(body.id, body.name, body.response))
        elif isinstance(part, InlineDataPart | FileDataPart):
            (calls[-1].media if calls else extras).append(part)
        elif isinstance(part, TextPart):
            extras.append(part)
        else:
            raise TypeError(
                f"a turn's parts are toolbatch parts (TextPart, FunctionResponsePart, "
                f"InlineDataPart, FileDataPart), got {type(part).__name__}: {part!r:.80}; "
                f"validate wire dicts with toolbatch.parts_adapter first"
            )
    return Batch(calls, extras)


def _compact(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def response_text(response: Mapping[str, JsonValue]) -> str:
    """The model-facing text of one function response.

    ``output`` as it is, then ``Error: <error>``, then any other keys as one compact JSON
    object, one per line; non-string values are compact JSON. Empty when there is nothing.
    """
    pieces: list[str] = []
    output = response.get("output")
    if output is not None:
        pieces.append(output if isinstance(output, str) else _compact(output))
    error = response.get("error")
    if error is not None:
        pieces.append("Error: " + (error if isinstance(error, str) else _compact(error)))
    rest = {key: value for key, value in response.items() if key not in ("output", "error")}
    if rest:
        pieces.append(_compact(rest))
    return "\n".join(pieces)


@runtime_checkable
class HasDeclarations(Protocol):
    """A registry or scheduler: anything that lists its tool declarations."""

    def declarations(self) -> list[ToolDeclaration]:
        """The tools to declare to the model."""
        ...


def declarations_of(tools: HasDeclarations | Iterable[ToolDeclaration]) -> list[ToolDeclaration]:
    """The declarations of a registry-like object, or the declarations given.

    Raises:
        TypeError: an element is not a ``ToolDeclaration``.
    """
    items = tools.declarations() if isinstance(tools, HasDeclarations) else tools
    found: list[ToolDeclaration] = []
    for item in items:
        if not isinstance(item, ToolDeclaration):
            raise TypeError(
                f"tool_definitions takes a Registry (or anything with .declarations()) or "
                f"ToolDeclaration objects, got {type(item).__name__}: {item!r:.80}"
            )
        found.append(item)
    return found
