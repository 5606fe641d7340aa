"""OpenAI Chat Completions: what the API receives for each kind of part, and the calls read."""

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
from tests.providers._sdk import assert_conforms, chat_sdk
from toolbatch import ToolDeclaration, default_registry
from toolbatch.providers import openai_chat


@pytest.mark.parametrize("name", list(sample_turns()))
def test_every_message_is_a_chat_message_param(name: str) -> None:
    """Each message validates against the SDK's ChatCompletionMessageParam."""
    for message in openai_chat.tool_results(sample_turns()[name]):
        assert_conforms(message, chat_sdk.ChatCompletionMessageParam)


def test_one_tool_message_per_call_in_order_then_the_batch_text() -> None:
    """Results pair with their call ids in order; hook context and stop follow as a user message."""
    messages = openai_chat.tool_results(hook_turn())
    assert [m["role"] for m in messages] == ["tool", "tool", "user"]
    assert [m["tool_call_id"] for m in messages[:2]] == ["call_a", "call_b"]
    assert messages[0]["content"] == "ok"
    assert messages[1]["content"] == "tests: 3 failed\nError: exit code 1"
    assert [p["text"] for p in messages[2]["content"]] == [
        "PostToolBatch hook: lint found 2 warnings",
        "Stopped by a PostToolBatch hook: the tests fail",
    ]


def test_images_follow_in_a_user_message_labelled_with_their_call() -> None:
    """Tool messages take text only, so the image goes in the next user message."""
    image = png(64, 48)
    tool, user = openai_chat.tool_results(media_turn(inline("image/png", image, "shot.png")))
    assert tool == {"role": "tool", "tool_call_id": "call_media", "content": "screenshot taken"}
    label, part = user["content"]
    assert "call_media" in label["text"]
    assert part == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + b64(image)},
    }


def test_a_wav_becomes_a_reference_to_the_saved_file() -> None:
    """Audio never reaches the API (the bug: it went as image_url with data:audio/wav)."""
    messages = openai_chat.tool_results(media_turn(inline("audio/wav", wav(), "speech.wav")))
    assert [m["role"] for m in messages] == ["tool"]
    assert "data:audio" not in json.dumps(messages)
    content = messages[0]["content"]
    assert "audio/wav" in content
    assert "takes no audio" in content
    assert str(SAVED / "speech.wav") in content


def test_a_30_mb_image_is_not_sent_inline() -> None:
    """Over the 20,971,520-character image_url limit: a reference, not 40 MB of base64."""
    messages = openai_chat.tool_results(media_turn(inline("image/png", big_png(), "big.png")))
    assert len(json.dumps(messages)) < 2_000
    assert "per-image limit" in messages[0]["content"]
    assert str(SAVED / "big.png") in messages[0]["content"]


def test_tool_calls_from_the_sdk_object_and_its_dict() -> None:
    """The SDK's ChatCompletion and its plain dict give the same calls."""
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{bad json"},
                        },
                    ],
                },
            }
        ],
    }
    from_dict = openai_chat.tool_calls(body)
    assert openai_chat.tool_calls(chat_sdk.ChatCompletion.model_validate(body)) == from_dict
    assert openai_chat.tool_calls(body["choices"][0]["message"]) == from_dict
    good, bad = from_dict
    assert (good.id, good.name, good.args, good.invalid) == (
        "call_1",
        "read_file",
        {"path": "a"},
        None,
    )
    assert (bad.id, bad.name, bad.args) == ("call_2", "ls", {})
    assert bad.invalid is not None
    assert "not valid JSON" in bad.invalid


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        pytest.param(
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}},
            "must be a JSON object, got an array",
            id="array-arguments",
        ),
        pytest.param(
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": '"s"'}},
            "must be a JSON object, got a string",
            id="string-arguments",
        ),
        pytest.param(
            {"id": "x", "type": "custom", "custom": {"name": "f", "input": "raw"}},
            "'custom' tool call",
            id="custom-call",
        ),
        pytest.param({"id": "x", "type": "function"}, "has no function", id="no-function"),
        pytest.param("garbage", "not an object", id="not-an-object"),
        pytest.param(
            {"id": "x", "type": "function", "function": {"arguments": "{}"}},
            "names no tool",
            id="no-name",
        ),
    ],
)
def test_a_malformed_call_is_kept_and_marked_invalid(entry: object, reason: str) -> None:
    """Every call the model made comes back, so each gets an answer."""
    [call] = openai_chat.tool_calls({"role": "assistant", "tool_calls": [entry]})
    assert call.args == {}
    assert call.invalid is not None
    assert reason in call.invalid


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param({"choices": []}, id="no-choices"),
        pytest.param({"role": "assistant", "content": "done"}, id="text-only"),
        pytest.param({"role": "assistant", "content": None, "tool_calls": None}, id="null-calls"),
    ],
)
def test_empty_replies_have_no_calls(reply: object) -> None:
    """A reply without calls ends the turn."""
    assert openai_chat.tool_calls(reply) == []


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param({"error": {"message": "overloaded"}}, id="error-body"),
        pytest.param("hello", id="string"),
        pytest.param(None, id="none"),
        pytest.param({"choices": [{"text": "legacy completion"}]}, id="legacy-completion"),
    ],
)
def test_unknown_reply_shapes_are_a_value_error(reply: object) -> None:
    """Not a completion: say what was expected instead of pretending there were no calls."""
    with pytest.raises(ValueError, match="not a Chat Completions reply"):
        openai_chat.tool_calls(reply)


def test_a_missing_call_id_is_made_up_so_the_call_is_answered() -> None:
    """Some compatible servers omit ids; the call still gets one to pair with."""
    [call] = openai_chat.tool_calls(
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": ""}}]}
    )
    assert (call.id, call.name, call.args, call.invalid) == ("call_0", "f", {}, None)


def test_tool_definitions_are_function_tool_params() -> None:
    """The registry's declarations as chat tools."""
    tools = openai_chat.tool_definitions(default_registry())
    assert [t["function"]["name"] for t in tools] == ["run_shell_command"]
    for tool in tools:
        assert_conforms(tool, chat_sdk.ChatCompletionFunctionToolParam)
    declared = openai_chat.tool_definitions([ToolDeclaration(name="noop")])
    assert declared[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_unclosed_arguments_fail_that_call_and_the_others_are_kept() -> None:
    """Issue 29, item 5: 5 KB of "[" as arguments was a RecursionError that lost the reply's
    every call; now only that call is invalid, with the reason, and the other runs."""
    entries = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "[" * 5_000}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
    ]
    bad, good = openai_chat.tool_calls({"role": "assistant", "tool_calls": entries})
    assert bad.invalid is not None
    assert "deeper than 128 levels" in bad.invalid
    assert good.invalid is None
    assert good.args == {"x": 1}
