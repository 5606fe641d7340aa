"""The response side of the wire model: tool results, tool-call responses and turns.

:class:`ToolFailure`, :class:`ToolResult`, :class:`ToolCallResponse` and :class:`Turn`, and
the builders the hot paths use to make and copy them unvalidated (``replace_*``,
``completed_turn``, ``text_result``). The overview of the wire model is in
:mod:`toolbatch._core._wire`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, TypeVar

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    SkipValidation,
    computed_field,
    model_validator,
)

from toolbatch._core._calls import ToolCall
from toolbatch._core._parts import (
    _VALUE_CONFIG,
    FunctionResponse,
    FunctionResponsePart,
    Part,
    TextPart,
    _check_parts,
    _WireValue,
    model_text_length,
    parts_adapter,
)
from toolbatch._core._preview import Preview

__all__ = [
    "ResponseStatus",
    "ToolCallResponse",
    "ToolFailure",
    "ToolResult",
    "Turn",
    "completed_turn",
    "function_response_part",
    "replace_field",
    "replace_fields",
    "replace_finalized",
    "replace_function_response",
    "replace_output",
    "text_result",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFailure(_WireValue):
    """Why a tool call failed: a message for the model and a machine-readable type."""

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    message: str
    type: str = "execution_failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult(_WireValue):
    """What a producer returns for one call.

    Attributes:
        content: the model-facing content, as text or as parts.
        display: the rich user-facing value, independent of the model response.
        error: why the call failed, or ``None``.
        persisted_output_files: ``None`` when the producer made no persistence decision,
            ``()`` when it decided and there is no reusable file, else the paths where the
            complete output already lives. Never serialized.
        preview: when ``content`` is a preview the producer cut (the text of its one
            function response's ``output``), the :class:`toolbatch._core._preview.Preview` it
            made, so the finalizer shortens it from the same excerpt instead of nesting a
            second header. Internal, never serialized; ignored unless the text still matches.
        returncode: the exit status of the process the call ran, as ``subprocess`` reports
            it (``-N``: killed by signal N), when it exited; ``None`` when it did not (a
            timeout, a cancellation) or the tool runs none. What decides on the exit reads
            this, never the text. Internal, never serialized.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    content: str | list[Part] = ""
    display: JsonValue = None
    error: ToolFailure | None = None
    persisted_output_files: Annotated[tuple[Path, ...] | None, Field(exclude=True)] = None
    preview: Annotated[SkipValidation[Preview | None], Field(exclude=True)] = field(
        default=None, repr=False
    )
    returncode: Annotated[int | None, Field(exclude=True)] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        content = self.content
        if type(content) is not str:
            _check_parts(content, "ToolResult.content")

    @classmethod
    def failure(
        cls, message: str, *, type: str = "execution_failed", content: str = ""
    ) -> ToolResult:
        """A failed result carrying ``message`` (and optional partial output)."""
        return cls(content=content, error=ToolFailure(message=message, type=type))


ResponseStatus: TypeAlias = Literal["success", "error", "cancelled", "skipped", "duplicate"]
"""How a call ended; every status but ``success`` carries an error message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResponse(_WireValue):
    """One call's response as every layer after the producer sees it.

    Only ``call_id``, ``name`` and ``parts`` are required; ``content_length`` is always
    derived from the parts (code points the model reads, see
    :func:`model_text_length`). ``persisted_output_files`` and ``finalize_state`` are
    internal and never serialized: ``finalize_state`` is owned by ``toolbatch.finalize``
    (which text slots hold a preview it made, and of what), so a later, smaller budget
    shortens a preview instead of nesting a second one. Leave it alone; it is checked
    against the current text before use, so a stale value is ignored. ``call_args`` are the
    arguments of the call this response answers (what hooks see as ``tool_input``); it is
    internal too and set by ``from_result`` and ``failed``. ``hook_notes`` and ``hook_stop``
    are what the call's own hooks (PreToolUse, PostToolUse, PostToolUseFailure) asked to tell
    the model and why they stopped the agent: internal, never part of the response's parts;
    ``complete_turn`` sends the notes as the turn's own text parts, bounded by the budget.
    ``returncode`` is the producer's (``ToolResult.returncode``), kept through finalizing:
    internal too.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    call_id: str
    name: str
    parts: list[Part]
    display: JsonValue = None
    error: str | None = None
    error_type: str | None = None
    status: ResponseStatus = "success"
    persisted_output_files: Annotated[tuple[Path, ...] | None, Field(exclude=True)] = None
    finalize_state: Annotated[object, Field(exclude=True)] = field(default=None, repr=False)
    call_args: Annotated[dict[str, JsonValue] | None, Field(exclude=True)] = field(
        default=None, repr=False
    )
    hook_notes: Annotated[tuple[str, ...], Field(exclude=True)] = field(default=(), repr=False)
    hook_stop: Annotated[str | None, Field(exclude=True)] = field(default=None, repr=False)
    returncode: Annotated[int | None, Field(exclude=True)] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_parts(self.parts, "ToolCallResponse.parts")
        if self.status != "success" and not self.error:
            raise ValueError(
                f"a response with status {self.status!r} needs an error message; "
                f"pass error=... (only status 'success' may omit it)"
            )

    @model_validator(mode="before")
    @classmethod
    def _derived_fields_are_not_inputs(cls, data: Any) -> Any:
        # A dump carries ``content_length``; it is derived from the parts, never taken.
        if isinstance(data, Mapping) and "content_length" in data:
            data = {key: value for key, value in data.items() if key != "content_length"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def content_length(self) -> int:
        """Code points of model-facing text in ``parts`` (always computed from them)."""
        return model_text_length(self.parts)

    def with_parts(
        self,
        parts: list[Part],
        *,
        persisted_output_files: tuple[Path, ...] | Literal["keep"] | None = "keep",
    ) -> ToolCallResponse:
        """A copy with new ``parts`` (``content_length`` follows them).

        ``finalize_state`` is kept: the finalizer only uses it for slots whose text is
        still exactly the preview it made.
        """
        if persisted_output_files == "keep":
            return dataclasses.replace(self, parts=parts)
        return dataclasses.replace(self, parts=parts, persisted_output_files=persisted_output_files)

    @classmethod
    def from_result(
        cls,
        call: ToolCall,
        result: ToolResult,
        *,
        status: ResponseStatus | None = None,
    ) -> ToolCallResponse:
        """Wrap a producer's result as the call's response.

        Text content becomes ``functionResponse.response.output``; a failure puts its message
        under ``error`` (and keeps any partial output under ``output``). Content given as
        parts keeps its media after the function response; content that already holds a
        ``functionResponse`` part is used as given.
        """
        failure = result.error
        if failure is None and status is None:
            # The usual results, the hot path: text, or one text part (an MCP tool's).
            content = result.content
            if type(content) is str:
                return _text_response(call, result, content)
            if len(content) == 1 and type(content[0]) is TextPart:
                return _text_response(call, result, content[0].text)
        if status is None:
            status = "error" if failure is not None else "success"
        parts = _result_parts(call, result.content, failure)
        error = failure.message if failure is not None else None
        if error is None and status != "success":
            error = f"tool call ended with status {status}"
        return _new_response(
            call.id,
            call.name,
            parts,
            result.display,
            error,
            failure.type if failure is not None else None,
            status,
            result.persisted_output_files,
            result.preview,
            call.args,
            (),
            None,
            result.returncode,
        )

    @classmethod
    def failed(
        cls,
        call: ToolCall,
        message: str,
        *,
        status: ResponseStatus = "error",
        error_type: str = "execution_failed",
    ) -> ToolCallResponse:
        """A response for a call that produced nothing but an error.

        It is already decided for persistence (``persisted_output_files=()``): there is no
        producer output to keep.
        """
        parts: list[Part] = [_function_response(call, {"error": message})]
        return cls(
            call_id=call.id,
            name=call.name,
            parts=parts,
            display=message,
            error=message,
            error_type=error_type,
            status=status,
            persisted_output_files=(),
            call_args=call.args,
        )


_D = TypeVar("_D", bound=_WireValue)


def replace_fields(value: _D, **changes: Any) -> _D:
    """A copy of ``value`` with ``changes`` (``dataclasses.replace``), unvalidated: for
    values toolbatch itself made. Never use it on user input: validate that."""
    return dataclasses.replace(value, **changes)  # type: ignore[type-var]


def replace_field(value: _D, name: str, new: Any) -> _D:
    """:func:`replace_fields` for one field (the finalizer's cut text parts)."""
    if type(value) is TextPart and name == "text":
        return TextPart(text=new)  # type: ignore[return-value]
    return dataclasses.replace(value, **{name: new})  # type: ignore[type-var]


# The finalizer's hot path builds three values per cut response, thousands per batch, and a
# frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``. These
# builders make the same plain objects through the classes' own slot descriptors, for
# values toolbatch itself made (no ``__post_init__`` check: they are complete by
# construction). They are the dataclasses' own slots, not any library's internals.
_new = object.__new__
_set_body_id = FunctionResponse.__dict__["id"].__set__
_set_body_name = FunctionResponse.__dict__["name"].__set__
_set_body_response = FunctionResponse.__dict__["response"].__set__
_set_part_body = FunctionResponsePart.__dict__["function_response"].__set__
_SET_RESPONSE: Final = tuple(
    ToolCallResponse.__dict__[item.name].__set__ for item in dataclasses.fields(ToolCallResponse)
)
(
    _set_call_id,
    _set_name,
    _set_parts,
    _set_display,
    _set_error,
    _set_error_type,
    _set_status,
    _set_files,
    _set_state,
    _set_call_args,
    _set_hook_notes,
    _set_hook_stop,
    _set_returncode,
) = _SET_RESPONSE


def _new_function_part(
    call_id: str, name: str, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """``FunctionResponsePart(function_response=FunctionResponse(...))``, built directly."""
    body = _new(FunctionResponse)
    _set_body_id(body, call_id)
    _set_body_name(body, name)
    _set_body_response(body, response)
    part = _new(FunctionResponsePart)
    _set_part_body(part, body)
    return part


def _new_response(
    call_id: str,
    name: str,
    parts: list[Part],
    display: JsonValue,
    error: str | None,
    error_type: str | None,
    status: ResponseStatus,
    persisted_output_files: tuple[Path, ...] | None,
    finalize_state: object,
    call_args: dict[str, JsonValue] | None,
    hook_notes: tuple[str, ...],
    hook_stop: str | None,
    returncode: int | None,
) -> ToolCallResponse:
    """A ``ToolCallResponse`` of every field's value, built directly (the hot paths')."""
    response = _new(ToolCallResponse)
    _set_call_id(response, call_id)
    _set_name(response, name)
    _set_parts(response, parts)
    _set_display(response, display)
    _set_error(response, error)
    _set_error_type(response, error_type)
    _set_status(response, status)
    _set_files(response, persisted_output_files)
    _set_state(response, finalize_state)
    _set_call_args(response, call_args)
    _set_hook_notes(response, hook_notes)
    _set_hook_stop(response, hook_stop)
    _set_returncode(response, returncode)
    return response


def replace_finalized(
    response: ToolCallResponse,
    parts: list[Part],
    finalize_state: object,
    persisted_output_files: tuple[Path, ...] | None,
) -> ToolCallResponse:
    """A copy of ``response`` with the three fields a finalizer pass sets, unvalidated.

    ``replace_fields`` for values the finalizer made (``content_length`` follows
    ``parts``), without merging keyword arguments: its hot path, one per cut response.
    """
    return _new_response(
        response.call_id,
        response.name,
        parts,
        response.display,
        response.error,
        response.error_type,
        response.status,
        persisted_output_files,
        finalize_state,
        response.call_args,
        response.hook_notes,
        response.hook_stop,
        response.returncode,
    )


def replace_function_response(
    part: FunctionResponsePart, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """A copy of ``part`` whose function response holds ``response``, unvalidated.

    ``replace_fields(part, function_response=replace_fields(part.function_response,
    response=response))`` in one call: the finalizer's hot path, for values it made.
    """
    body = part.function_response
    return _new_function_part(body.id, body.name, response)


def _text_response(call: ToolCall, result: ToolResult, text: str) -> ToolCallResponse:
    """``ToolCallResponse.from_result`` of a successful result whose content is ``text``,
    built directly (one per call of every batch)."""
    return _new_response(
        call.id,
        call.name,
        [_new_function_part(call.id, call.name, {"output": text})],
        result.display,
        None,
        None,
        "success",
        result.persisted_output_files,
        result.preview,
        call.args,
        (),
        None,
        result.returncode,
    )


def replace_output(
    response: ToolCallResponse,
    function_response: FunctionResponse,
    output: str,
    finalize_state: object,
    persisted_output_files: tuple[Path, ...] | None,
) -> ToolCallResponse:
    """A copy of ``response`` whose one part holds ``{"output": output}``, unvalidated.

    The part is a copy of ``function_response`` (the response's only part, whose body held
    only its ``output``) with that body; ``finalize_state`` and ``persisted_output_files``
    are set as in :func:`replace_finalized`. The finalizer's usual cut, one per cut
    response: the three values in one call, for values it made.
    """
    # _new_function_part and replace_finalized, inline: one call per cut response.
    body = _new(FunctionResponse)
    _set_body_id(body, function_response.id)
    _set_body_name(body, function_response.name)
    _set_body_response(body, {"output": output})
    part = _new(FunctionResponsePart)
    _set_part_body(part, body)
    new = _new(ToolCallResponse)
    _set_call_id(new, response.call_id)
    _set_name(new, response.name)
    _set_parts(new, [part])
    _set_display(new, response.display)
    _set_error(new, response.error)
    _set_error_type(new, response.error_type)
    _set_status(new, response.status)
    _set_files(new, persisted_output_files)
    _set_state(new, finalize_state)
    _set_call_args(new, response.call_args)
    _set_hook_notes(new, response.hook_notes)
    _set_hook_stop(new, response.hook_stop)
    _set_returncode(new, response.returncode)
    return new


def function_response_part(
    call_id: str, name: str, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """A ``{"functionResponse": ...}`` part from trusted values (no validation)."""
    return _new_function_part(call_id, name, response)


def completed_turn(
    responses: list[ToolCallResponse], parts: list[Part], stop_reason: str | None
) -> Turn:
    """A ``Turn`` of values the turn's completion made (once per batch)."""
    return Turn(responses=responses, parts=parts, stop_reason=stop_reason)


def text_result(text: str) -> ToolResult:
    """A successful ``ToolResult`` of plain text (an exact ``str``): what a tool function
    returned, on the hot path of every call."""
    return ToolResult(content=text)


def _function_response(call: ToolCall, response: dict[str, JsonValue]) -> FunctionResponsePart:
    return _new_function_part(call.id, call.name, response)


def _result_parts(
    call: ToolCall, content: str | list[Part], failure: ToolFailure | None
) -> list[Part]:
    if isinstance(content, str):
        text = content
        media: list[Part] = []
    else:
        if any(isinstance(part, FunctionResponsePart) for part in content):
            return list(content)
        text = "\n".join(part.text for part in content if isinstance(part, TextPart))
        media = [part for part in content if not isinstance(part, TextPart)]
    response: dict[str, JsonValue] = {}
    if failure is not None:
        response["error"] = failure.message
        if text:
            response["output"] = text
    else:
        response["output"] = text
    return [_function_response(call, response), *media]


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn(_WireValue):
    """One completed batch: what the model receives, and what was recorded.

    Attributes:
        responses: one per call, in the model's call order.
        parts: every part to send, in order: each response's parts, then the turn's own
            top-level text parts (``context_parts``: hook context, the stop reason).
        stop_reason: set when a hook stopped the agent after this turn (its reason, also
            the last context part); the results are kept and recorded, and an agent loop
            ends the prompt instead of asking the model again.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    responses: list[ToolCallResponse]
    parts: list[Part]
    stop_reason: str | None = None

    @property
    def content_length(self) -> int:
        """Code points of model-facing text in the whole turn (what the budget bounds)."""
        return model_text_length(self.parts)

    @property
    def context_parts(self) -> list[Part]:
        """The parts after the responses' own: text that belongs to the batch, not a tool."""
        return self.parts[sum(len(response.parts) for response in self.responses) :]

    def wire_parts(self) -> list[dict[str, Any]]:
        """The parts to send, as plain JSON values: Gemini-style wire dicts
        (``functionResponse``, ``text``, ``inlineData``, ``fileData``), what is recorded."""
        dumped: list[dict[str, Any]] = parts_adapter.dump_python(
            self.parts, mode="json", by_alias=True, exclude_none=True
        )
        return dumped
