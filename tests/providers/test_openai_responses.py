"""OpenAI Responses: what the API receives for each kind of part, and the calls read."""

from __future__ import annotations

import json

import pytest

from tests.providers._samples import (
    SAVED,
    b64,
    big_png,
    hook_turn,
    inline,
    media_turn,
    png,
    sample_turns,
    wav,
)
from tests.providers._sdk import assert_conforms, responses_sdk
from toolbatch import default_registry
from toolbatch.providers import openai_responses


@pytest.mark.parametrize("name", list(sample_turns()))
def test_every_item_is_a_response_input_item_param(name: str) -> None:
    """Each item validates against the SDK's ResponseInputItemParam."""
    for item in openai_responses.tool_results(sample_turns()[name]):
        assert_conforms(item, responses_sdk.ResponseInputItemParam)


def test_one_output_item_per_call_in_order_then_the_batch_text() -> None:
    """Outputs pair with call ids in order; hook context and stop follow as a user message."""
    first, second, user = openai_responses.tool_results(hook_turn())
    assert first == {"type": "function_call_output", "call_id": "call_a", "output": "ok"}
    assert second["call_id"] == "call_b"
    assert second["output"] == "tests: 3 failed\nError: exit code 1"
    assert user["role"] == "user"
    assert [p["text"] for p in user["content"]] == [
        "PostToolBatch hook: lint found 2 warnings",
        "Stopped by a PostToolBatch hook: the tests fail",
    ]


def test_an_image_goes_inside_the_function_call_output() -> None:
    """The API takes images in function output: text, then the image, in one item."""
    image = png(64, 48)
    [item] = openai_responses.tool_results(media_turn(inline("image/png", image, "shot.png")))
    assert item["output"] == [
        {"type": "input_text", "text": "screenshot taken"},
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + b64(image),
            "detail": "auto",
        },
    ]


def test_a_wav_becomes_a_reference_to_the_saved_file() -> None:
    """Audio is not an input of function output: the text names the saved file."""
    [item] = openai_responses.tool_results(media_turn(inline("audio/wav", wav(), "speech.wav")))
    assert isinstance(item["output"], str)
    assert "takes no audio" in item["output"]
    assert str(SAVED / "speech.wav") in item["output"]


def test_a_30_mb_image_is_not_sent_inline() -> None:
    """Over the per-image limit: a reference, and the output stays a string."""
    [item] = openai_responses.tool_results(media_turn(inline("image/png", big_png(), "big.png")))
    assert len(json.dumps(item)) < 2_000
    assert "per-image limit" in item["output"]


def test_tool_calls_are_the_function_call_items() -> None:
    """Only function_call items are calls; their call_id is the id to answer."""
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "let me look", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "read_file",
                "arguments": '{"path": "a"}',
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_2",
                "name": "ls",
                "arguments": "not json",
            },
        ],
    }
    from_dict = openai_responses.tool_calls(body)
    assert openai_responses.tool_calls(responses_sdk.Response.model_validate(body)) == from_dict
    assert openai_responses.tool_calls(body["output"]) == from_dict
    good, bad = from_dict
    assert (good.id, good.name, good.args, good.ordinal) == (
        "call_1",
        "read_file",
        {"path": "a"},
        0,
    )
    assert bad.id == "call_2"
    assert bad.invalid is not None
    assert "not valid JSON" in bad.invalid


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        pytest.param(
            {"type": "function_call", "call_id": "x", "name": "f", "arguments": "3"},
            "must be a JSON object, got a number",
            id="number-arguments",
        ),
        pytest.param(
            {"type": "custom_tool_call", "call_id": "x", "name": "f", "input": "raw"},
            "'custom_tool_call'",
            id="custom-call",
        ),
        pytest.param("garbage", "not an object", id="not-an-object"),
    ],
)
def test_a_malformed_call_is_kept_and_marked_invalid(item: object, reason: str) -> None:
    """Every call the model made comes back, so each gets an answer."""
    [call] = openai_responses.tool_calls({"output": [item]})
    assert call.invalid is not None
    assert reason in call.invalid


def test_empty_and_unknown_replies() -> None:
    """No output items: no calls; a body without output: a ValueError naming the shape."""
    assert openai_responses.tool_calls({"output": []}) == []
    assert openai_responses.tool_calls([]) == []
    with pytest.raises(ValueError, match="not a Responses reply"):
        openai_responses.tool_calls({"error": {"message": "rate limited"}})


def test_tool_definitions_are_function_tool_params() -> None:
    """The registry's declarations as Responses function tools, strict off."""
    tools = openai_responses.tool_definitions(default_registry())
    assert [t["name"] for t in tools] == ["run_shell_command"]
    for tool in tools:
        assert_conforms(tool, responses_sdk.FunctionToolParam)
        assert tool["strict"] is False
