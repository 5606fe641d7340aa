"""The request side of the wire model: tool calls and tool declarations.

``ToolCall`` and ``ToolDeclaration`` stay pydantic models (the response side is plain
dataclasses, see :mod:`toolbatch._core._wire`); :func:`trusted_call` builds a call from
values already checked, unvalidated.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["ToolCall", "ToolDeclaration", "trusted_call"]


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
