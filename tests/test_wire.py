"""The wire model: every part shape round-trips, and internal metadata never serializes."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

import toolbatch
from tests.strategies import scaled, tool_call_responses
from toolbatch import (
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
    Turn,
)

WIRE_PARTS: list[dict[str, Any]] = [
    {"text": "hello"},
    {"text": ""},
    {"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {"output": "ok"}}},
    {"functionResponse": {"id": "c2", "name": "t", "response": {"error": "boom"}}},
    {
        "functionResponse": {
            "id": "c3",
            "name": "t",
            "response": {"output": {"nested": [1, 2.5, None, True, "x"]}, "extra": 3},
        }
    },
    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/doc.pdf"}},
]

parts = TypeAdapter(list[Part])


@pytest.mark.parametrize("wire", [pytest.param(w, id=next(iter(w))) for w in WIRE_PARTS])
def test_every_part_shape_round_trips_to_identical_dicts(wire: dict[str, Any]) -> None:
    """A wire part validates and dumps back to the very same dict."""
    [model] = parts.validate_python([wire])
    assert parts.dump_python([model], by_alias=True, exclude_none=True) == [wire]
    assert json.loads(parts.dump_json([model], by_alias=True, exclude_none=True)) == [wire]


def test_public_adapter_round_trips_a_mixed_list() -> None:
    """toolbatch.parts_adapter round-trips a list holding every shape, in order."""
    models = toolbatch.parts_adapter.validate_python(WIRE_PARTS)
    assert [type(m) for m in models][:3] == [TextPart, TextPart, FunctionResponsePart]
    assert toolbatch.parts_adapter.dump_python(models, by_alias=True, exclude_none=True) == (
        WIRE_PARTS
    )


@pytest.mark.parametrize(
    ("wire", "named"),
    [
        pytest.param({"thought": "hmm"}, "thought", id="unknown-key"),
        pytest.param({}, "[]", id="empty-object"),
        pytest.param("just a string", "str", id="not-an-object"),
        pytest.param({"functionCall": {"name": "x"}}, "functionCall", id="function-call"),
    ],
)
def test_unknown_part_shape_is_rejected_naming_it(wire: Any, named: str) -> None:
    """An unknown part fails validation with an error that names its shape."""
    with pytest.raises(ValidationError) as caught:
        parts.validate_python([wire])
    message = str(caught.value)
    assert "unknown part shape" in message
    assert named in message


def test_extra_keys_inside_a_known_part_are_rejected() -> None:
    """A known shape with a stray key is an error naming the key, not silently dropped."""
    with pytest.raises(ValidationError, match="mime"):
        parts.validate_python([{"inlineData": {"mimeType": "a/b", "data": "", "mime": 1}}])


def test_response_needs_only_call_id_name_and_parts() -> None:
    """Every other field of ToolCallResponse has a sensible default."""
    wire = [
        {"text": "ab"},
        {
            "functionResponse": {
                "id": "c1",
                "name": "t",
                "response": {"output": "héllo", "error": "x"},
            }
        },
    ]
    response = ToolCallResponse.model_validate({"call_id": "c1", "name": "t", "parts": wire})
    assert response.status == "success"
    assert response.persisted_output_files is None
    assert response.error is None
    assert response.content_length == 2 + 5 + 1


def test_content_length_counts_code_points_not_bytes_or_utf16() -> None:
    """An astral character counts 1, as Python's len does."""
    response = ToolCallResponse(call_id="c", name="t", parts=[TextPart(text="😀é中")])
    assert response.content_length == 3


def test_non_success_status_requires_an_error_message() -> None:
    """A cancelled (or any non-success) response without an error message is rejected."""
    with pytest.raises(ValueError, match="needs an error message"):
        ToolCallResponse(call_id="c", name="t", parts=[], status="cancelled")
    with pytest.raises(ValidationError, match="needs an error message"):
        ToolCallResponse.model_validate(
            {"call_id": "c", "name": "t", "parts": [], "status": "skipped"}
        )


def _response_with_files() -> ToolCallResponse:
    return ToolCallResponse(
        call_id="c1",
        name="t",
        parts=[TextPart(text="x")],
        persisted_output_files=(Path("/tmp/secret-artifact.txt"),),
    )


def test_persisted_output_files_is_never_serialized() -> None:
    """model_dump, model_dump_json and a round trip all leave the metadata out."""
    response = _response_with_files()
    assert response.persisted_output_files == (Path("/tmp/secret-artifact.txt"),)
    dumped = response.model_dump()
    assert "persisted_output_files" not in dumped
    assert "persisted_output_files" not in response.model_dump(by_alias=True)
    as_json = response.model_dump_json()
    assert "persisted_output_files" not in as_json
    assert "secret-artifact" not in as_json
    rebuilt = ToolCallResponse.model_validate_json(as_json)
    assert rebuilt.persisted_output_files is None
    assert rebuilt.parts == response.parts


def test_tool_result_metadata_is_never_serialized() -> None:
    """A ToolResult dumps without persisted_output_files as well."""
    result = ToolResult(content="out", persisted_output_files=(Path("/x/y.txt"),))
    assert "persisted_output_files" not in result.model_dump()
    assert "/x/y.txt" not in result.model_dump_json()


def test_from_result_wraps_text_as_function_response_output() -> None:
    """Text content becomes functionResponse.response.output under the call's id and name."""
    call = ToolCall(id="c9", name="echo", args={"x": 1})
    response = ToolCallResponse.from_result(call, ToolResult(content="hi", display="shown"))
    [part] = response.parts
    assert isinstance(part, FunctionResponsePart)
    assert part.model_dump() == {
        "functionResponse": {"id": "c9", "name": "echo", "response": {"output": "hi"}}
    }
    assert response.display == "shown"
    assert response.status == "success"


def test_from_result_of_one_text_part_is_the_response_of_its_text() -> None:
    """One text part (an MCP tool's usual result) answers as its text would, and as the
    general path makes it: equal and dumped alike."""
    call = ToolCall(id="c9", name="mcp__s__echo", args={"text": "hi"})
    from_part = ToolCallResponse.from_result(call, ToolResult(content=[TextPart(text="hi")]))
    from_text = ToolCallResponse.from_result(call, ToolResult(content="hi"))
    assert from_part == from_text
    assert from_part.model_dump(by_alias=True) == from_text.model_dump(by_alias=True)
    general = ToolCallResponse.from_result(  # a status given: the general path
        call, ToolResult(content=[TextPart(text="hi")]), status="success"
    )
    assert from_part == general
    assert from_part.model_dump_json() == general.model_dump_json()
    assert from_part.content_length == 2


def test_from_result_keeps_media_after_the_function_response() -> None:
    """Parts content: texts joined into the output, media kept (same objects) after it."""
    image = InlineDataPart.model_validate({"inlineData": {"mimeType": "image/png", "data": "AA=="}})
    call = ToolCall(id="c", name="shot")
    result = ToolResult(content=[TextPart(text="a"), image, TextPart(text="b")])
    response = ToolCallResponse.from_result(call, result)
    assert response.parts[1] is image
    first = response.parts[0]
    assert isinstance(first, FunctionResponsePart)
    assert first.function_response.response == {"output": "a\nb"}


def test_from_result_failure_carries_error_and_partial_output() -> None:
    """A failed result is an error response with the message and any partial output."""
    call = ToolCall(id="c", name="t")
    result = ToolResult.failure("timed out after 5 s", type="timeout", content="partial")
    response = ToolCallResponse.from_result(call, result)
    assert response.status == "error"
    assert response.error == "timed out after 5 s"
    assert response.error_type == "timeout"
    first = response.parts[0]
    assert isinstance(first, FunctionResponsePart)
    assert first.function_response.response == {"error": "timed out after 5 s", "output": "partial"}
    assert response.content_length == len("timed out after 5 s") + len("partial")


def test_failed_response_is_already_decided_for_persistence() -> None:
    """A synthetic error response carries () so no later layer writes it to disk."""
    response = ToolCallResponse.failed(ToolCall(id="c", name="t"), "unknown tool 't'")
    assert response.persisted_output_files == ()
    assert response.status == "error"


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda: ToolCallResponse(call_id="c", name="t", parts=[{"text": "x"}]), id="response"
        ),
        pytest.param(lambda: ToolResult(content=[{"text": "x"}]), id="result"),
        pytest.param(lambda: ToolCallResponse(call_id="c", name="t", parts="x"), id="not-a-list"),
    ],
)
def test_constructors_refuse_wire_dicts_as_parts_saying_how_to_validate(build: Any) -> None:
    """Constructors take part objects; a wire dict is refused with the way to validate it."""
    with pytest.raises(TypeError, match="parts") as caught:
        build()
    assert "TextPart" in str(caught.value)


def test_value_types_are_frozen_hashable_and_pickle() -> None:
    """A part is immutable, hashable when its fields are, and survives a pickle round trip."""
    part = TextPart(text="a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.text = "b"  # type: ignore[misc]
    assert hash(part) == hash(TextPart(text="a"))
    assert {part, TextPart(text="a")} == {part}
    response = ToolCallResponse.from_result(ToolCall(id="c", name="t"), ToolResult(content="x"))
    assert pickle.loads(pickle.dumps(response)) == response


def test_model_copy_replaces_fields_without_validating() -> None:
    """model_copy(update=...) keeps the other fields; model_validate keeps an instance."""
    response = _response_with_files()
    renamed = response.model_copy(update={"name": "other"})
    assert renamed.name == "other"
    assert renamed.parts == response.parts
    assert renamed.persisted_output_files == response.persisted_output_files
    assert response.model_copy() == response
    assert ToolCallResponse.model_validate(response) is response


def test_pydantic_models_nest_the_value_types() -> None:
    """A pydantic model with a response field validates its wire form and dumps it back."""

    class Holder(BaseModel):
        model_config = ConfigDict(extra="forbid")
        response: ToolCallResponse

    wire = {"call_id": "c", "name": "t", "parts": [{"text": "hi"}], "status": "success"}
    holder = Holder.model_validate({"response": wire})
    assert holder.response.parts == [TextPart(text="hi")]
    assert holder.model_dump()["response"]["parts"] == [{"text": "hi"}]
    with pytest.raises(ValidationError, match="unknown part shape"):
        Holder.model_validate({"response": {**wire, "parts": [{"thought": "x"}]}})


@settings(max_examples=scaled(100))
@given(tool_call_responses())
def test_a_response_round_trips_through_its_dump(response: ToolCallResponse) -> None:
    """Any response validates back from its dump to equal parts, status and error, and its
    turn dumps the same wire parts (internal fields never travel)."""
    rebuilt = ToolCallResponse.model_validate(response.model_dump())
    assert rebuilt.parts == response.parts
    assert (rebuilt.status, rebuilt.error) == (response.status, response.error)
    assert rebuilt.persisted_output_files is None
    turn = Turn(responses=[response], parts=list(response.parts))
    assert turn.wire_parts() == toolbatch.parts_adapter.dump_python(
        rebuilt.parts, mode="json", by_alias=True, exclude_none=True
    )


def test_the_finalizers_builders_keep_every_field_they_do_not_replace() -> None:
    """``replace_output`` and ``replace_finalized`` set every slot of the response they
    build (a field added to ``ToolCallResponse`` and forgotten there would be an unset slot:
    an ``AttributeError`` where a hook or an integration reads it)."""
    from toolbatch._core import FunctionResponse, replace_finalized, replace_output

    call = ToolCall(id="c1", name="run_shell_command", args={"command": "false"})
    source = dataclasses.replace(
        ToolCallResponse.from_result(call, ToolResult(content="x" * 50, returncode=3)),
        display="shown",
        hook_notes=("a note",),
    )
    body = FunctionResponse(id="c1", name="run_shell_command", response={"output": "x"})
    built = [
        replace_output(source, body, "cut", None, (Path("/tmp/a"),)),
        replace_finalized(source, source.parts, None, (Path("/tmp/a"),)),
    ]
    replaced = {"parts", "finalize_state", "persisted_output_files"}
    for response in built:
        for item in dataclasses.fields(ToolCallResponse):
            if item.name not in replaced:
                assert getattr(response, item.name) == getattr(source, item.name), item.name
        assert response.persisted_output_files == (Path("/tmp/a"),)
