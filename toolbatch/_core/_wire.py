"""The wire model: parts, tool calls, tool results and tool-call responses.

Parts are the Gemini-style dicts a model receives (camelCase on the wire, snake_case
attributes). ``persisted_output_files`` is internal runtime state: it is excluded from every
serialization, and a response rebuilt from its wire form does not have it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol, TypeAlias, TypeVar

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

# Every model here and at the other edges is ``defer_build``: its validator and serializer
# are built on first use, so a process pays only for the models it touches (``toolbatch
# run``'s cold start builds two of the 25).
_PART_CONFIG: Final = ConfigDict(
    frozen=True,
    extra="forbid",
    defer_build=True,
    validate_by_name=True,
    validate_by_alias=True,
    serialize_by_alias=True,
)


class TextPart(BaseModel):
    """A top-level text part: ``{"text": str}``."""

    model_config = _PART_CONFIG

    text: str


class FunctionResponse(BaseModel):
    """The body of a function response: ``{"id", "name", "response": {...}}``.

    ``response`` usually holds ``"output"`` or ``"error"`` but may hold any JSON object.
    """

    model_config = _PART_CONFIG

    id: str
    name: str
    response: dict[str, JsonValue]


class FunctionResponsePart(BaseModel):
    """``{"functionResponse": {...}}``: one tool call's model-facing response."""

    model_config = _PART_CONFIG

    function_response: FunctionResponse = Field(alias="functionResponse")


class InlineData(BaseModel):
    """Inline media: ``{"mimeType": str, "data": <base64 str>}``.

    ``persisted_file`` is internal, like ``persisted_output_files``: where the finalizer
    saved these bytes once (``None``: not saved), so a model API that cannot take them
    inline is sent a reference to that file instead. Never serialized.
    """

    model_config = _PART_CONFIG

    mime_type: str = Field(alias="mimeType")
    data: str
    persisted_file: Path | None = Field(default=None, exclude=True, repr=False)


class InlineDataPart(BaseModel):
    """``{"inlineData": {...}}``: media the budget never counts or changes."""

    model_config = _PART_CONFIG

    inline_data: InlineData = Field(alias="inlineData")


class FileData(BaseModel):
    """A media reference: ``{"mimeType": str, "fileUri": str}``."""

    model_config = _PART_CONFIG

    mime_type: str = Field(alias="mimeType")
    file_uri: str = Field(alias="fileUri")


class FileDataPart(BaseModel):
    """``{"fileData": {...}}``: media the budget never counts or changes."""

    model_config = _PART_CONFIG

    file_data: FileData = Field(alias="fileData")


_PART_TAGS: Final = {
    "text": "text",
    "functionResponse": "functionResponse",
    "function_response": "functionResponse",
    "inlineData": "inlineData",
    "inline_data": "inlineData",
    "fileData": "fileData",
    "file_data": "fileData",
}
_PART_CLASSES: Final[dict[type[BaseModel], str]] = {
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


class ToolFailure(BaseModel):
    """Why a tool call failed: a message for the model and a machine-readable type."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    message: str
    type: str = "execution_failed"


class ToolResult(BaseModel):
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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    content: str | list[Part] = ""
    display: JsonValue = None
    error: ToolFailure | None = None
    persisted_output_files: tuple[Path, ...] | None = Field(default=None, exclude=True)
    preview: SkipValidation[Preview | None] = Field(default=None, exclude=True, repr=False)

    @classmethod
    def failure(
        cls, message: str, *, type: str = "execution_failed", content: str = ""
    ) -> ToolResult:
        """A failed result carrying ``message`` (and optional partial output)."""
        return cls(content=content, error=ToolFailure(message=message, type=type))


ResponseStatus: TypeAlias = Literal["success", "error", "cancelled", "skipped", "duplicate"]
"""How a call ended; every status but ``success`` carries an error message."""


class ToolCallResponse(BaseModel):
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

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    call_id: str
    name: str
    parts: list[Part]
    display: JsonValue = None
    error: str | None = None
    error_type: str | None = None
    status: ResponseStatus = "success"
    persisted_output_files: tuple[Path, ...] | None = Field(default=None, exclude=True)
    finalize_state: object = Field(default=None, exclude=True, repr=False)
    call_args: dict[str, JsonValue] | None = Field(default=None, exclude=True, repr=False)
    hook_notes: tuple[str, ...] = Field(default=(), exclude=True, repr=False)
    hook_stop: str | None = Field(default=None, exclude=True, repr=False)

    @model_validator(mode="before")
    @classmethod
    def _derived_fields_are_not_inputs(cls, data: Any) -> Any:
        # A dump carries ``content_length``; it is derived from the parts, never taken.
        if isinstance(data, Mapping) and "content_length" in data:
            data = {key: value for key, value in data.items() if key != "content_length"}
        return data

    @model_validator(mode="after")
    def _complete(self) -> ToolCallResponse:
        if self.status != "success" and not self.error:
            raise ValueError(
                f"a response with status {self.status!r} needs an error message; "
                f"pass error=... (only status 'success' may omit it)"
            )
        return self

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
        update: dict[str, Any] = {"parts": parts}
        if persisted_output_files != "keep":
            update["persisted_output_files"] = persisted_output_files
        return replace_fields(self, **update)

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
        return _trusted(
            cls,
            {
                "call_id": call.id,
                "name": call.name,
                "parts": parts,
                "display": result.display,
                "error": error,
                "error_type": failure.type if failure is not None else None,
                "status": status,
                "persisted_output_files": result.persisted_output_files,
                "finalize_state": result.preview,
                "call_args": call.args,
                "hook_notes": (),
                "hook_stop": None,
            },
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
        return _trusted(
            cls,
            {
                "call_id": call.id,
                "name": call.name,
                "parts": parts,
                "display": message,
                "error": message,
                "error_type": error_type,
                "status": status,
                "persisted_output_files": (),
                "finalize_state": None,
                "call_args": call.args,
                "hook_notes": (),
                "hook_stop": None,
            },
        )


_M = TypeVar("_M", bound=BaseModel)
_new_instance = object.__new__
# BaseModel's own slots, set through their descriptors (half the time of object.__setattr__,
# which looks each name up along the class's MRO first).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_set_attribute = object.__setattr__


def _trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """An instance from a complete dict of already-valid field values, unvalidated.

    ``model_construct`` without its per-field default handling, for the hot path: the
    caller passes every field.
    """
    instance = _new_instance(cls)
    _set_dict(instance, values)
    # Every field is given, so every instance of a class has the same fields set: share
    # one set (pydantic copies it before any update, and frozen models never change it).
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = set(cls.model_fields)
    _set_fields_set(instance, fields_set)
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


_FIELDS_SET: Final[dict[type[BaseModel], set[str]]] = {}


def replace_fields(model: _M, **changes: Any) -> _M:
    """A copy of ``model`` with ``changes``, unvalidated: for values toolbatch itself made.

    What ``model_copy(update=...)`` does, without its per-field deep work (the finalizer
    copies thousands of parts per batch). Never use it on user input: validate that.
    """
    return _trusted(type(model), {**model.__dict__, **changes})


# The finalizer's hot path builds three models per cut response, thousands per batch: these
# helpers make them as _trusted does, through the base model's slot descriptors, inline
# (a Python call per object costs as much as the object here).
_FUNCTION_RESPONSE_FIELDS: Final = _FIELDS_SET.setdefault(
    FunctionResponse, set(FunctionResponse.model_fields)
)
_FUNCTION_RESPONSE_PART_FIELDS: Final = _FIELDS_SET.setdefault(
    FunctionResponsePart, set(FunctionResponsePart.model_fields)
)
_RESPONSE_FIELDS: Final = _FIELDS_SET.setdefault(
    ToolCallResponse, set(ToolCallResponse.model_fields)
)
_CALL_FIELDS: Final = _FIELDS_SET.setdefault(ToolCall, set(ToolCall.model_fields))


def replace_field(model: _M, name: str, value: Any) -> _M:
    """:func:`replace_fields` for one field, for values toolbatch itself made (unvalidated).

    The same copy, without merging keyword arguments (the finalizer's hot path).
    """
    values = model.__dict__.copy()
    values[name] = value
    return _trusted(type(model), values)


def _new_response(values: dict[str, Any]) -> ToolCallResponse:
    """A ``ToolCallResponse`` of every field's value, unvalidated (the hot paths' one)."""
    response = _new_instance(ToolCallResponse)
    _set_dict(response, values)
    _set_fields_set(response, _RESPONSE_FIELDS)
    _set_extra(response, None)
    _set_private(response, None)
    return response


def _new_function_part(values: dict[str, Any]) -> FunctionResponsePart:
    """A ``{"functionResponse": ...}`` part of the function response's field values,
    unvalidated (the hot paths' one)."""
    body = _new_instance(FunctionResponse)
    _set_dict(body, values)
    _set_fields_set(body, _FUNCTION_RESPONSE_FIELDS)
    _set_extra(body, None)
    _set_private(body, None)
    part = _new_instance(FunctionResponsePart)
    # Its one field set as an attribute, which CPython keeps in the object (as trusted_call
    # does), rather than a dict of its own: per cut response, one container fewer for the
    # cyclic collector and about 190 bytes less of fresh heap.
    _set_attribute(part, "function_response", body)
    _set_fields_set(part, _FUNCTION_RESPONSE_PART_FIELDS)
    _set_extra(part, None)
    _set_private(part, None)
    return part


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
    values = response.__dict__.copy()
    values["parts"] = parts
    values["finalize_state"] = finalize_state
    values["persisted_output_files"] = persisted_output_files
    return _new_response(values)


def replace_function_response(
    part: FunctionResponsePart, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """A copy of ``part`` whose function response holds ``response``, unvalidated.

    ``replace_fields(part, function_response=replace_fields(part.function_response,
    response=response))`` in one call: the finalizer's hot path, for values it made.
    """
    values = part.function_response.__dict__.copy()
    values["response"] = response
    return _new_function_part(values)


def _text_response(call: ToolCall, result: ToolResult, text: str) -> ToolCallResponse:
    """``ToolCallResponse.from_result`` of a successful result whose content is ``text``,
    unvalidated (one per call of every batch)."""
    part = _new_function_part({"id": call.id, "name": call.name, "response": {"output": text}})
    return _new_response(
        {
            "call_id": call.id,
            "name": call.name,
            "parts": [part],
            "display": result.display,
            "error": None,
            "error_type": None,
            "status": "success",
            "persisted_output_files": result.persisted_output_files,
            "finalize_state": result.preview,
            "call_args": call.args,
            "hook_notes": (),
            "hook_stop": None,
        }
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
    response: the three models in one call, for values it made.
    """
    values = function_response.__dict__.copy()
    values["response"] = {"output": output}
    part = _new_function_part(values)
    return replace_finalized(response, [part], finalize_state, persisted_output_files)


def function_response_part(
    call_id: str, name: str, response: dict[str, JsonValue]
) -> FunctionResponsePart:
    """A ``{"functionResponse": ...}`` part from trusted values (no validation)."""
    body = _trusted(FunctionResponse, {"id": call_id, "name": name, "response": response})
    return _trusted(FunctionResponsePart, {"function_response": body})


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
    """A ``Turn`` of values the turn's completion made, unvalidated (once per batch)."""
    return _trusted(Turn, {"responses": responses, "parts": parts, "stop_reason": stop_reason})


def text_result(text: str) -> ToolResult:
    """A successful ``ToolResult`` of plain text (an exact ``str``), unvalidated: what a
    tool function returned, on the hot path of every call."""
    return _trusted(
        ToolResult,
        {
            "content": text,
            "display": None,
            "error": None,
            "persisted_output_files": None,
            "preview": None,
        },
    )


def _function_response(call: ToolCall, response: dict[str, JsonValue]) -> FunctionResponsePart:
    return function_response_part(call.id, call.name, response)


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


class Turn(BaseModel):
    """One completed batch: what the model receives, and what was recorded.

    Attributes:
        responses: one per call, in the model's call order.
        parts: every part to send, in order: each response's parts, then the turn's own
            top-level text parts (``context_parts``: hook context, the stop reason).
        stop_reason: set when a hook stopped the agent after this turn (its reason, also
            the last context part); the results are kept and recorded, and an agent loop
            ends the prompt instead of asking the model again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

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
