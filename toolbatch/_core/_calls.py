"""The request side of the wire model: tool calls and tool declarations.

``ToolCall`` and ``ToolDeclaration`` are plain frozen dataclasses like the response side
(see :mod:`toolbatch._core._wire`): the constructor checks only what is cheap (the types of
the top-level fields, positive limits) and raises ``TypeError`` or ``ValueError`` naming the
field and the fix; ``model_validate`` validates data from outside through pydantic (JSON
values all the way down, unknown keys refused, a ``ValidationError`` naming each problem).
:func:`trusted_call` builds a call from values already checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, NoReturn

from pydantic import ConfigDict, Field, JsonValue

from toolbatch._core._parts import _VALUE_CONFIG, _WireValue

__all__ = ["ToolCall", "ToolDeclaration", "trusted_call"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(_WireValue):
    """One tool call from the model's turn.

    Construct it with keywords from values you hold (``args`` a JSON object as a ``dict``);
    validate what comes from outside with ``ToolCall.model_validate(data)``.

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

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    id: str
    name: str
    args: dict[str, JsonValue] = field(default_factory=dict)
    ordinal: int | None = None
    prompt_id: str | None = None
    invalid: str | None = None

    def __post_init__(self) -> None:
        # One test on the usual path; the field at fault is found only when one is.
        if not (
            isinstance(self.id, str)
            and isinstance(self.name, str)
            and isinstance(self.args, dict)
            and (self.ordinal is None or type(self.ordinal) is int)
            and (self.prompt_id is None or isinstance(self.prompt_id, str))
            and (self.invalid is None or isinstance(self.invalid, str))
        ):
            _refuse_call(self)


def _refuse_call(call: ToolCall) -> NoReturn:
    for name in ("id", "name"):
        value = getattr(call, name)
        if not isinstance(value, str):
            raise TypeError(f"ToolCall.{name} must be a str, got {value!r:.80}; pass str(...)")
    if not isinstance(call.args, dict):
        fix = (
            "parse the model's JSON arguments first (json.loads), or build the call with "
            "ToolCall.model_validate({...})"
            if isinstance(call.args, str | bytes)
            else "pass dict(args)"
        )
        raise TypeError(
            f"ToolCall.args must be a dict (a JSON object), got "
            f"{type(call.args).__name__} {call.args!r:.80}; {fix}"
        )
    ordinal = call.ordinal
    if ordinal is not None and type(ordinal) is not int:
        raise TypeError(
            f"ToolCall.ordinal must be an int or None, got {ordinal!r:.80}; "
            f"pass the call's position in the model's call list"
        )
    for name in ("prompt_id", "invalid"):
        value = getattr(call, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"ToolCall.{name} must be a str or None, got {value!r:.80}")
    raise AssertionError(f"no field of {call!r:.200} is wrong")  # pragma: no cover


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDeclaration(_WireValue):
    """How a tool is declared to the model: name, description and JSON schema of its args.

    Its dump (``model_dump``) is what the model is shown: ``name``, ``description`` and
    ``input_schema``; the runtime's flags below are left out.

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

    __pydantic_config__: ClassVar[ConfigDict] = _VALUE_CONFIG

    name: Annotated[str, Field(min_length=1)]
    description: str = ""
    input_schema: dict[str, JsonValue] = field(default_factory=_empty_object_schema)
    needs_permission: Annotated[bool, Field(exclude=True)] = False
    read_only: Annotated[bool, Field(exclude=True)] = False
    trusted: Annotated[bool, Field(exclude=True)] = False
    timeout_s: Annotated[float | None, Field(gt=0, exclude=True)] = None
    output_threshold: Annotated[int | None, Field(gt=0, exclude=True)] = None

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name:
            raise (ValueError if isinstance(name, str) else TypeError)(
                f"ToolDeclaration.name must be a non-empty str, got {name!r:.80}; "
                f"pass the name the model calls the tool by"
            )
        if not isinstance(self.description, str):
            raise TypeError(
                f"ToolDeclaration.description must be a str, got {self.description!r:.80}"
            )
        if not isinstance(self.input_schema, dict):
            raise TypeError(
                f"ToolDeclaration.input_schema of {name!r} must be a dict (a JSON object "
                f"schema), got {self.input_schema!r:.80}"
            )
        for flag in ("needs_permission", "read_only", "trusted"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise TypeError(
                    f"ToolDeclaration.{flag} of {name!r} must be True or False, got {value!r:.80}"
                )
        timeout_s = self.timeout_s
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not timeout_s > 0
            or math.isnan(timeout_s)
        ):
            raise ValueError(
                f"ToolDeclaration.timeout_s of {name!r} must be a positive number of seconds "
                f"or None, got {timeout_s!r:.80}; pass None for the runtime's ceiling"
            )
        threshold = self.output_threshold
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int) or threshold <= 0
        ):
            raise ValueError(
                f"ToolDeclaration.output_threshold of {name!r} must be a positive int (characters) "
                f"or None, got {threshold!r:.80}; pass None when the producer bounds its own output"
            )


def trusted_call(
    call_id: str, name: str, args: dict[str, JsonValue], ordinal: int | None
) -> ToolCall:
    """A ``ToolCall`` from values already checked (a parsed JSON request).

    Plain construction: nothing is validated beyond the constructor's type checks, and
    ``args`` is kept as given, not copied (a service reading 100,000 calls builds each one
    once, in its slots).
    """
    return ToolCall(id=call_id, name=name, args=args, ordinal=ordinal)
