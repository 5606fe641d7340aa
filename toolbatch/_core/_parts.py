"""The part types of the wire model and the pydantic-style methods every value type keeps.

``_WireValue`` (the methods over one cached ``TypeAdapter`` per class), the parts a model
receives (:class:`TextPart`, :class:`FunctionResponsePart`, :class:`InlineDataPart`,
:class:`FileDataPart` and their bodies), the :data:`Part` union with its ``parts_adapter``,
and what model-facing text the parts hold (:func:`model_text_length`). The overview of the
wire model is in :mod:`toolbatch._core._wire`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, TypeAlias, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    JsonValue,
    Tag,
    TypeAdapter,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "RESPONSE_TEXT_KEYS",
    "FileData",
    "FileDataPart",
    "FunctionResponse",
    "FunctionResponsePart",
    "InlineData",
    "InlineDataPart",
    "Part",
    "TextPart",
    "compact_json",
    "function_response_text_length",
    "model_text_length",
    "parts_adapter",
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
