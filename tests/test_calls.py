"""The request side of the wire model: ``ToolCall`` and ``ToolDeclaration`` are plain frozen
dataclasses; pydantic validates them at the edges (issue 30 item 3)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import JsonValue, ValidationError

from tests.strategies import CALL_IDS, TOOL_NAMES, scaled
from toolbatch import ToolCall, ToolDeclaration
from toolbatch._core import trusted_call

_json: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_args = st.dictionaries(st.text(max_size=6), _json, max_size=4)


@st.composite
def _calls(draw: st.DrawFn) -> ToolCall:
    return ToolCall(
        id=draw(st.sampled_from(CALL_IDS) | st.text(max_size=6)),
        name=draw(st.sampled_from(TOOL_NAMES)),
        args=draw(_args),
        ordinal=draw(st.none() | st.integers(min_value=0, max_value=10_000)),
        prompt_id=draw(st.none() | st.text(max_size=4)),
        invalid=draw(st.none() | st.just("arguments are not valid JSON")),
    )


@settings(max_examples=scaled(100))
@given(_calls())
def test_a_call_is_the_same_call_through_every_form(call: ToolCall) -> None:
    """Dumped and validated, as JSON, pickled (Ray ships calls) and copied: an equal call."""
    assert ToolCall.model_validate(call.model_dump()) == call
    assert ToolCall.model_validate_json(call.model_dump_json()) == call
    assert pickle.loads(pickle.dumps(call)) == call
    assert call.model_copy() == call
    assert call.model_copy(update={"ordinal": 7}) == dataclasses.replace(call, ordinal=7)
    if call.prompt_id is None and call.invalid is None:
        built = trusted_call(call.id, call.name, call.args, call.ordinal)
        assert built == call
        assert repr(built) == repr(call)


def test_a_call_is_a_small_frozen_value() -> None:
    """Calls are frozen, slotted (no per-call dict) and compare by value."""
    call = ToolCall(id="c1", name="run_shell_command", args={"command": "ls"})
    assert call == ToolCall(id="c1", name="run_shell_command", args={"command": "ls"})
    assert call != ToolCall(id="c2", name="run_shell_command", args={"command": "ls"})
    assert not hasattr(call, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.id = "other"  # type: ignore[misc]
    assert ToolCall(id="c", name="t").args == {}
    assert ToolCall.model_validate(call) is call
    assert repr(call) == (
        "ToolCall(id='c1', name='run_shell_command', args={'command': 'ls'}, ordinal=None, "
        "prompt_id=None, invalid=None)"
    )


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        pytest.param({"id": 1}, TypeError, r"ToolCall\.id must be a str, got 1", id="id"),
        pytest.param({"name": None}, TypeError, r"ToolCall\.name must be a str", id="name"),
        pytest.param(
            {"args": '{"command": "ls"}'},
            TypeError,
            r"ToolCall\.args must be a dict .* got str .*json\.loads",
            id="args-json-text",
        ),
        pytest.param(
            {"args": [1]}, TypeError, r"ToolCall\.args must be a dict .*dict\(args\)", id="args"
        ),
        pytest.param({"ordinal": True}, TypeError, r"ToolCall\.ordinal must be an int", id="bool"),
        pytest.param({"ordinal": "1"}, TypeError, r"ToolCall\.ordinal .* got '1'", id="ordinal"),
        pytest.param({"prompt_id": 3}, TypeError, r"ToolCall\.prompt_id must be a str", id="pid"),
        pytest.param({"invalid": b"x"}, TypeError, r"ToolCall\.invalid must be a str", id="why"),
    ],
)
def test_a_call_built_wrong_names_the_field_and_the_fix(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    """The constructor's cheap checks refuse a wrong top-level field, naming it."""
    with pytest.raises(error, match=message):
        ToolCall(**{"id": "c", "name": "t", **fields})


@pytest.mark.parametrize(
    ("data", "where"),
    [
        pytest.param({"id": 1, "name": "t"}, "id", id="id"),
        pytest.param({"id": "c", "name": "t", "extra": 1}, "extra", id="unknown-key"),
        pytest.param({"id": "c", "name": "t", "args": {"x": {1, 2}}}, "args.x", id="not-json"),
        pytest.param({"id": "c", "name": "t", "args": []}, "args", id="args-list"),
        pytest.param({"name": "t"}, "id", id="missing-id"),
    ],
)
def test_validating_a_call_from_outside_names_each_problem(
    data: dict[str, Any], where: str
) -> None:
    """``model_validate`` checks JSON values all the way down and refuses unknown keys."""
    with pytest.raises(ValidationError) as raised:
        ToolCall.model_validate(data)
    [error] = raised.value.errors()
    assert ".".join(str(step) for step in error["loc"]) == where


def test_a_declaration_dumps_what_the_model_is_shown() -> None:
    """The dump is name, description and schema; the runtime's flags stay on the object and
    come back through validation (the Ray codec ships them beside the dump)."""
    declaration = ToolDeclaration(
        name="grep",
        description="Search files.",
        input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}},
        read_only=True,
        trusted=True,
        timeout_s=30,
        output_threshold=25_000,
    )
    dumped = declaration.model_dump(mode="json")
    assert dumped == {
        "name": "grep",
        "description": "Search files.",
        "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
    }
    assert ToolDeclaration.model_validate_json(declaration.model_dump_json()) == (
        dataclasses.replace(
            declaration, read_only=False, trusted=False, timeout_s=None, output_threshold=None
        )
    )
    flags = {"read_only": True, "trusted": True, "timeout_s": 30, "output_threshold": 25_000}
    assert ToolDeclaration.model_validate({**dumped, **flags}) == declaration
    assert pickle.loads(pickle.dumps(declaration)) == declaration
    assert ToolDeclaration(name="t").input_schema == {"type": "object", "properties": {}}
    assert ToolDeclaration(name="a").input_schema is not ToolDeclaration(name="b").input_schema


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        pytest.param({"name": ""}, ValueError, r"name must be a non-empty str, got ''", id="empty"),
        pytest.param({"name": 3}, TypeError, r"name must be a non-empty str, got 3", id="name"),
        pytest.param({"timeout_s": 0}, ValueError, r"timeout_s of 't' .* got 0", id="timeout"),
        pytest.param({"timeout_s": float("nan")}, ValueError, r"timeout_s .* got nan", id="nan"),
        pytest.param({"timeout_s": True}, ValueError, r"timeout_s .* got True", id="bool"),
        pytest.param(
            {"output_threshold": -1}, ValueError, r"output_threshold of 't' .* got -1", id="cut"
        ),
        pytest.param({"input_schema": "{}"}, TypeError, r"input_schema of 't' must", id="schema"),
        pytest.param({"read_only": "yes"}, TypeError, r"read_only of 't' must be", id="flag"),
        pytest.param({"description": None}, TypeError, r"description must be a str", id="desc"),
    ],
)
def test_a_declaration_built_wrong_names_the_field_and_the_fix(
    fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A tool declared with an empty name or a limit that is not positive is refused."""
    with pytest.raises(error, match=message):
        ToolDeclaration(**{"name": "t", **fields})


@pytest.mark.parametrize(
    ("data", "where"),
    [
        pytest.param({"name": ""}, "name", id="empty-name"),
        pytest.param({"name": "t", "timeout_s": 0}, "timeout_s", id="timeout"),
        pytest.param({"name": "t", "output_threshold": 0}, "output_threshold", id="threshold"),
        pytest.param({"name": "t", "schema": {}}, "schema", id="unknown-key"),
    ],
)
def test_validating_a_declaration_names_each_problem(data: dict[str, Any], where: str) -> None:
    """``model_validate`` keeps the declaration's rules (non-empty name, positive limits)."""
    with pytest.raises(ValidationError) as raised:
        ToolDeclaration.model_validate(data)
    assert [".".join(map(str, e["loc"])) for e in raised.value.errors()] == [where]
