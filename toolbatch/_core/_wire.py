"""The wire model: parts, tool calls, tool results and tool-call responses.

Parts are the Gemini-style dicts a model receives (camelCase on the wire, snake_case
attributes). ``persisted_output_files`` is internal runtime state: it is excluded from every
serialization, and a response rebuilt from its wire form does not have it.

Plain data inside, pydantic at the edges (issue 30). The value types (:class:`ToolCall`,
:class:`ToolDeclaration`, :class:`TextPart`, :class:`FunctionResponse`,
:class:`FunctionResponsePart`, :class:`InlineData`, :class:`InlineDataPart`,
:class:`FileData`, :class:`FileDataPart`, :class:`ToolFailure`, :class:`ToolResult`,
:class:`ToolCallResponse` and :class:`Turn`) are plain frozen dataclasses
(``@dataclass(frozen=True, slots=True, kw_only=True)``): construct them with keywords, and
the hot path (scheduler, finalizer, guard, service) builds and
copies them as the plain objects they are, never validating. Pydantic validates and dumps
them where data enters and leaves, through one cached ``TypeAdapter`` per class (the
camelCase wire form, ``extra="forbid"``, the part union's shape check). The methods
embedders already call keep their meaning, as thin methods over that adapter and
``dataclasses.replace``:

- ``model_dump(mode=..., by_alias=..., exclude_none=..., ...)`` and ``model_dump_json()``:
  the adapter's ``dump_python`` / ``dump_json`` (internal fields never included);
- ``Cls.model_validate(obj)`` and ``Cls.model_validate_json(text)``: the adapter's
  validation (wire dicts in, a :class:`pydantic.ValidationError` naming what is wrong);
- ``model_copy(update=...)``: ``dataclasses.replace`` (unvalidated, as pydantic's is).

A constructor checks only what is cheap (top-level types, the invariants a caller can
break: a failed response's message, a declaration's positive limits) and raises
``TypeError`` or ``ValueError`` naming the field and the fix; nested JSON is validated by
``model_validate`` only. Nothing in toolbatch writes pydantic's internals
(``tests/test_no_pydantic_internals.py`` scans the source).

The model lives in three modules, one concept each: the part types and the value-type
methods in ``_parts``, the request side in ``_calls``, and the response side (results,
responses, turns and their hot-path builders) in ``_responses``. This module holds the
:class:`BatchObserver` protocol and re-exports the rest, so ``toolbatch._core._wire``
keeps every name it had.
"""

from __future__ import annotations

from typing import Protocol

from toolbatch._core._calls import (
    ToolCall as ToolCall,
    ToolDeclaration as ToolDeclaration,
    trusted_call as trusted_call,
)
from toolbatch._core._parts import (
    RESPONSE_TEXT_KEYS as RESPONSE_TEXT_KEYS,
    FileData as FileData,
    FileDataPart as FileDataPart,
    FunctionResponse as FunctionResponse,
    FunctionResponsePart as FunctionResponsePart,
    InlineData as InlineData,
    InlineDataPart as InlineDataPart,
    Part as Part,
    TextPart as TextPart,
    compact_json as compact_json,
    function_response_text_length as function_response_text_length,
    model_text_length as model_text_length,
    parts_adapter as parts_adapter,
)
from toolbatch._core._responses import (
    ResponseStatus as ResponseStatus,
    ToolCallResponse as ToolCallResponse,
    ToolFailure as ToolFailure,
    ToolResult as ToolResult,
    Turn as Turn,
    completed_turn as completed_turn,
    function_response_part as function_response_part,
    replace_field as replace_field,
    replace_fields as replace_fields,
    replace_finalized as replace_finalized,
    replace_function_response as replace_function_response,
    replace_output as replace_output,
    text_result as text_result,
)

__all__ = [
    "BatchObserver",
    "FileData",
    "FileDataPart",
    "FunctionResponse",
    "FunctionResponsePart",
    "InlineData",
    "InlineDataPart",
    "Part",
    "ResponseStatus",
    "TextPart",
    "ToolCall",
    "ToolCallResponse",
    "ToolDeclaration",
    "ToolFailure",
    "ToolResult",
    "Turn",
    "compact_json",
    "function_response_part",
    "function_response_text_length",
    "model_text_length",
    "parts_adapter",
    "replace_field",
    "replace_fields",
    "replace_finalized",
    "replace_function_response",
    "replace_output",
]


class BatchObserver(Protocol):
    """Live events of a running batch, for display (never what the model receives).

    Every call of a batch is reported exactly once: ``call_started`` then
    ``call_finished``, calls answered in place (unknown tool, invalid or duplicate call,
    denied) included. Any method may be left out: only those an observer has are called.
    Exceptions raised by an observer are logged and ignored.

    One more method is optional and outside the protocol, so observers without it still
    type-check: ``call_output(call, text)`` receives a running call's output text as it
    is produced (the shell's, decoded as read). Only when the observer has it do
    producers decode their output for display at all.
    """

    def call_started(self, call: ToolCall) -> None:
        """A call began (after approval, when it needed one), or is answered in place."""

    def call_progress(self, call: ToolCall, message: str) -> None:
        """A running call reported progress."""

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        """A call ended; ``response`` is its response before finalization (display use)."""
