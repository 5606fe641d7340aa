"""The wire model: parts, tool calls, tool results and tool-call responses.

Parts are the Gemini-style dicts a model receives (camelCase on the wire, snake_case
attributes). ``persisted_output_files`` is internal runtime state: it is excluded from every
serialization, and a response rebuilt from its wire form does not have it.

Plain data inside, pydantic at the edges (issue 30). The response-side value types
(:class:`TextPart`, :class:`FunctionResponse`, :class:`FunctionResponsePart`,
:class:`InlineData`, :class:`InlineDataPart`, :class:`FileData`, :class:`FileDataPart`,
:class:`ToolFailure`, :class:`ToolResult`, :class:`ToolCallResponse` and :class:`Turn`) are
plain frozen dataclasses (``@dataclass(frozen=True, slots=True, kw_only=True)``): construct
them with keywords, and the hot path (scheduler, finalizer, guard, service) builds and
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

``ToolCall`` and ``ToolDeclaration`` (the request side) stay pydantic models.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, Protocol, TypeAlias, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    SkipValidation,
    Tag,
    TypeAdapter,
    computed_field,
    model_validator,
)
from pydantic_core import PydanticCustomError

from toolbatch._core._preview import Preview

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

# What pydantic reads when it validates or dumps a value type (a stdlib dataclass takes
# its config from ``__pydantic_config__``). Its adapter is built on first use, so a process
# pays only for the types it validates or dumps (``toolbatch run``'s cold start builds none).
_PART_CONFIG: Final = ConfigDict(
    extra="forbid",
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)
_VALUE_CONFIG: Final = ConfigDict(extra="forbid")

_W = TypeVar("_W", bound="_WireValue")
_ADAPTERS: Final[dict[type[Any], TypeAdapter[Any]]] = {}


def _adapter(cls: type[_W]) -> TypeAdapter[_W]:
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        # Two threads may build it at once: both adapters are equal, one is kept.
        adapter = _ADAPTERS.setdefault(cls, TypeAdapter(cls))
    return adapter


class _WireValue:
    """The pydantic-style methods every value type keeps, over its cached TypeAdapter."""

    __slots__ = ()

    @classmethod
    def model_validate(cls: type[_W], obj: Any, **options: Any) -> _W:
        """``obj`` (a wire dict, or an instance) validated into this type."""
        return _adapter(cls).validate_python(obj, **options)

    @classmethod
    def model_validate_json(cls: type[_W], data: str | bytes, **options: Any) -> _W:
        """JSON text validated into this type."""
        return _adapter(cls).validate_json(data, **options)

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """This value as plain data (pydantic's ``dump_python`` options: ``mode``,
        ``by_alias``, ``exclude_none``, ``include``, ``exclude``...)."""
        dumped: dict[str, Any] = _adapter(type(self)).dump_python(self, **options)
        return dumped

    def model_dump_json(self, **options: Any) -> str:
        """This value as JSON text (pydantic's ``dump_json`` options)."""
        return _adapter(type(self)).dump_json(self, **options).decode()

    def model_copy(self: _W, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> _W:
        """A copy with ``update`` applied, unvalidated (``dataclasses.replace``)."""
        base = copy.deepcopy(self) if deep else self
        return dataclasses.replace(base, **(update or {}))  # type: ignore[type-var]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart(_WireValue):
    """A top-level text part: ``{"text": str}``."""

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionResponse(_WireValue):
    """The body of a function response: ``{"id", "name", "response": {...}}``.

    ``response`` usually holds ``"output"`` or ``"error"`` but may hold any JSON object.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    id: str
    name: str
    response: dict[str, JsonValue]


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionResponsePart(_WireValue):
    """``{"functionResponse": {...}}``: one tool call's model-facing response."""

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    function_response: Annotated[FunctionResponse, Field(alias="functionResponse")]


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineData(_WireValue):
    """Inline media: ``{"mimeType": str, "data": <base64 str>}``.

    ``persisted_file`` is internal, like ``persisted_output_files``: where the finalizer
    saved these bytes once (``None``: not saved), so a model API that cannot take them
    inline is sent a reference to that file instead. Never serialized.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    mime_type: Annotated[str, Field(alias="mimeType")]
    data: str
    persisted_file: Annotated[Path | None, Field(exclude=True)] = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineDataPart(_WireValue):
    """``{"inlineData": {...}}``: media the budget never counts or changes."""

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    inline_data: Annotated[InlineData, Field(alias="inlineData")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileData(_WireValue):
    """A media reference: ``{"mimeType": str, "fileUri": str}``."""

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    mime_type: Annotated[str, Field(alias="mimeType")]
    file_uri: Annotated[str, Field(alias="fileUri")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDataPart(_WireValue):
    """``{"fileData": {...}}``: media the budget never counts or changes."""

    __pydantic_config__: ClassVar[ConfigDict] = _PART_CONFIG

    file_data: Annotated[FileData, Field(alias="fileData")]


_PART_TAGS: Final = {
    "text": "text",
    "functionResponse": "functionResponse",
    "function_response": "functionResponse",
    "inlineData": "inlineData",
    "inline_data": "inlineData",
    "fileData": "fileData",
    "file_data": "fileData",
}
_PART_CLASSES: Final[dict[type[Any], str]] = {
    TextPart: "text",
    FunctionResponsePart: "functionResponse",
    InlineDataPart: "inlineData",
    FileDataPart: "fileData",
}


def _part_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in value:
            tag = _PART_TAGS.get(key)
            if tag is not None:
                return tag
        return None
    return _PART_CLASSES.get(type(value))


def _check_part_shape(value: Any) -> Any:
    if _part_tag(value) is None:
        if isinstance(value, dict):
            shape = f"an object with keys {sorted(map(str, value))!r}"
        else:
            shape = f"a {type(value).__name__} ({value!r:.60})"
        raise PydanticCustomError(
            "unknown_part",
            "unknown part shape: {shape}; a part is an object with exactly one of the keys "
            "'text', 'functionResponse', 'inlineData' or 'fileData'",
            {"shape": shape},
        )
    return value


Part: TypeAlias = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[FunctionResponsePart, Tag("functionResponse")]
    | Annotated[InlineDataPart, Tag("inlineData")]
    | Annotated[FileDataPart, Tag("fileData")],
    Discriminator(_part_tag),
    BeforeValidator(_check_part_shape),
]
"""One model-facing part: text, functionResponse, inlineData or fileData."""

parts_adapter: Final[TypeAdapter[list[Part]]] = TypeAdapter(
    list[Part], config=ConfigDict(defer_build=True)
)
"""Validates a wire list of parts and dumps it back to the identical dicts."""


def _check_parts(parts: object, where: str) -> None:
    """A constructor's check of its parts: a list of part objects (wire dicts are
    validated, not taken as they are)."""
    if not isinstance(parts, list):
        raise TypeError(
            f"{where} must be a list of parts (TextPart, FunctionResponsePart, "
            f"InlineDataPart, FileDataPart), got {parts!r:.80}"
        )
    for part in parts:
        if type(part) not in _PART_CLASSES:
            raise TypeError(
                f"{where} holds {part!r:.80}, not a part object; build parts with "
                f"TextPart(text=...) etc., or validate wire dicts with "
                f"toolbatch.parts_adapter.validate_python(...)"
            )


RESPONSE_TEXT_KEYS: Final = ("output", "error")
"""The keys of a function response whose string values are model-facing text as they are."""


def compact_json(value: object) -> str:
    """``value`` as compact JSON text (what a structured value costs the model)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def function_response_text_length(response: Mapping[str, object]) -> int:
    """Code points the model reads in one function response body.

    ``output`` and ``error`` count their length when they are strings and the length of
    their compact JSON otherwise. Every other key counts as the compact JSON of an object
    holding those keys, plus one for the newline that joins it to ``output`` when there is
    one: exactly the text the finalizer makes when it must cut the response and folds the
    other keys into ``output``.
    """
    total = 0
    extra = False
    for key, value in response.items():
        if key in RESPONSE_TEXT_KEYS:
            total += len(value) if isinstance(value, str) else len(compact_json(value))
        else:
            extra = True
    if extra:
        others = {key: value for key, value in response.items() if key not in RESPONSE_TEXT_KEYS}
        total += len(compact_json(others)) + ("output" in response)
    return total


def model_text_length(parts: Sequence[Part]) -> int:
    """Code points of all model-facing text in ``parts``.

    Counts top-level ``text`` and every value of a function response (see
    :func:`function_response_text_length`); media count nothing here.
    """
    total = 0
    for part in parts:
        if isinstance(part, FunctionResponsePart):
            total += function_response_text_length(part.function_response.response)
        elif isinstance(part, TextPart):
            total += len(part.text)
    return total


class ToolCall(BaseModel):
    """One tool call from the model's turn.

    Attributes:
        id: the call id the model gave (need not be unique or safe; toolbatch copes).
        name: the tool name.
        args: the arguments, a JSON object.
        ordinal: the call's position in the model's call list; ``None`` means its index in
            the list handed to ``run_batch``.
        prompt_id: the prompt this call answers, if the agent tracks one.
        invalid: why the model's call could not be read (its arguments were not a JSON
            object, say), or ``None``. An invalid call is never run: the scheduler answers
            it in place with an ``invalid_args`` error response carrying this reason.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    ordinal: int | None = None
    prompt_id: str | None = None
    invalid: str | None = None


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
    """

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    content: str | list[Part] = ""
    display: JsonValue = None
    error: ToolFailure | None = None
    persisted_output_files: Annotated[tuple[Path, ...] | None, Field(exclude=True)] = None
    preview: Annotated[SkipValidation[Preview | None], Field(exclude=True)] = field(
        default=None, repr=False
    )

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
    part = _new_function_part(function_response.id, function_response.name, {"output": output})
    return replace_finalized(response, [part], finalize_state, persisted_output_files)


def function_response_part(
    call_id: str, name: str, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """A ``{"functionResponse": ...}`` part from trusted values (no validation)."""
    return _new_function_part(call_id, name, response)


_new_instance = object.__new__
# ToolCall (the request side) is still a pydantic model: a service reading 100,000 calls
# builds them through BaseModel's own slots (issue 30 item 3 covers the response side).
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_set_attribute = object.__setattr__
_CALL_FIELDS: Final = set(ToolCall.model_fields)


def trusted_call(
    call_id: str, name: str, args: dict[str, JsonValue], ordinal: int | None
) -> ToolCall:
    """A ``ToolCall`` from values already checked (a parsed JSON request), unvalidated.

    For a service reading 100,000 calls at once: it skips validation, shares the set of
    fields every such call has (a validated model carries its own), and sets the fields one
    by one, so that CPython keeps them in the object against one table of keys for the
    class where a dict of their own would be built (19 MiB less for 100,000 calls). The
    same model: equal, dumped, copied and pickled alike.
    """
    call = _new_instance(ToolCall)
    _set_attribute(call, "id", call_id)
    _set_attribute(call, "name", name)
    _set_attribute(call, "args", args)
    _set_attribute(call, "ordinal", ordinal)
    _set_attribute(call, "prompt_id", None)
    _set_attribute(call, "invalid", None)
    _set_fields_set(call, _CALL_FIELDS)
    _set_extra(call, None)
    _set_private(call, None)
    return call


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


class ToolDeclaration(BaseModel):
    """How a tool is declared to the model: name, description and JSON schema of its args.

    Attributes:
        name: the tool name the model calls.
        description: what the tool does, for the model.
        input_schema: a JSON schema (an object schema) for the call's ``args``.
        needs_permission: whether an interactive front end (ACP) asks the user first.
        read_only: whether the tool only reads (speculative runs may run it ahead of time).
        trusted: whether its calls skip permission asks (an MCP server's ``trust`` or
            ``alwaysAllow``); deny rules and hooks still apply.
        timeout_s: the longest one call may run (``None``: the runtime's ceiling); the
            runtime applies the shorter of the two.
        output_threshold: output longer than this many characters, when the producer left
            it unpersisted, is persisted once and previewed (generic persistence);
            ``None``: the producer bounds its own output (the shell, MCP).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, JsonValue] = Field(default_factory=lambda: _empty_object_schema())
    needs_permission: bool = Field(default=False, exclude=True)
    read_only: bool = Field(default=False, exclude=True)
    trusted: bool = Field(default=False, exclude=True)
    timeout_s: float | None = Field(default=None, gt=0, exclude=True)
    output_threshold: int | None = Field(default=None, gt=0, exclude=True)


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


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
