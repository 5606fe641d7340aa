"""Anthropic Messages: what the API receives for each kind of part, and the calls read."""

from __future__ import annotations

import json

import pytest

from tests.providers._samples import (
    SAVED,
    b64,
    big_png,
    gif,
    hook_turn,
    inline,
    jpeg_header,
    media_turn,
    png,
    sample_turns,
    turn_of,
    wav,
    webp_header,
)
from tests.providers._sdk import anthropic_sdk, assert_conforms
from toolbatch import default_registry
from toolbatch.providers import anthropic


@pytest.mark.parametrize("name", list(sample_turns()))
def test_every_message_is_a_message_param(name: str) -> None:
    """The message validates against the SDK's MessageParam."""
    for message in anthropic.tool_results(sample_turns()[name]):
        assert_conforms(message, anthropic_sdk.MessageParam)


def test_tool_results_come_first_then_the_batch_text() -> None:
    """One user message: a tool_result per call in order, errors flagged, then text blocks."""
    [message] = anthropic.tool_results(hook_turn())
    assert message["role"] == "user"
    first, second, context, stop = message["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "call_a",
        "content": [{"type": "text", "text": "ok"}],
    }
    assert second["tool_use_id"] == "call_b"
    assert second["is_error"] is True
    assert second["content"] == [{"type": "text", "text": "tests: 3 failed\nError: exit code 1"}]
    assert context == {"type": "text", "text": "PostToolBatch hook: lint found 2 warnings"}
    assert stop == {"type": "text", "text": "Stopped by a PostToolBatch hook: the tests fail"}


def test_cancelled_and_duplicate_responses_are_errors() -> None:
    """Every response with an error is flagged is_error; successes are not."""
    turns = sample_turns()
    for name in ("cancellations", "duplicates"):
        [message] = anthropic.tool_results(turns[name])
        flags = [block.get("is_error", False) for block in message["content"]]
        assert sorted(flags) == [False, True], name


def test_an_empty_output_gives_a_result_without_content() -> None:
    """The API refuses empty text blocks; an empty result omits content."""
    [message] = anthropic.tool_results(sample_turns()["empty output"])
    assert message["content"] == [{"type": "tool_result", "tool_use_id": "call_4"}]


def test_an_image_goes_inside_its_tool_result() -> None:
    """Text, then the image block, inside the call's tool_result."""
    image = png(64, 48)
    [message] = anthropic.tool_results(media_turn(inline("image/png", image, "shot.png")))
    [result] = message["content"]
    assert result["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(image)},
    }


def test_a_wav_becomes_a_reference_to_the_saved_file() -> None:
    """Audio is not a tool_result block type: the text names the saved file."""
    [message] = anthropic.tool_results(media_turn(inline("audio/wav", wav(), "speech.wav")))
    [result] = message["content"]
    text = result["content"][1]["text"]
    assert "takes no audio" in text
    assert str(SAVED / "speech.wav") in text


def test_an_unsaved_wav_says_no_copy_is_available() -> None:
    """Without persisted_file the reference says so instead of naming a path."""
    [message] = anthropic.tool_results(media_turn(inline("audio/wav", wav())))
    assert "no saved copy is available" in message["content"][0]["content"][1]["text"]


def test_a_30_mb_image_is_not_sent_inline() -> None:
    """Over the 5 MiB per-image limit: a reference to the saved file."""
    [message] = anthropic.tool_results(media_turn(inline("image/png", big_png(), "big.png")))
    assert len(json.dumps(message)) < 2_000
    text = message["content"][0]["content"][1]["text"]
    assert "per-image limit" in text
    assert str(SAVED / "big.png") in text


def test_an_image_just_under_5_mib_is_sent_and_just_over_is_not() -> None:
    """The per-image limit counts base64 characters: 5,242,880."""
    header = png(100, 100)
    under = header + b"\0" * (anthropic.MAX_IMAGE_BASE64_CHARS * 3 // 4 - len(header) - 3)
    over = under + b"\0" * 6
    [message] = anthropic.tool_results(
        media_turn(inline("image/png", under, "under.png"), inline("image/png", over, "over.png"))
    )
    _, sent, refused = message["content"][0]["content"]
    assert sent["type"] == "image"
    assert refused["type"] == "text"
    assert "over.png" in refused["text"]


def test_an_image_taller_than_8000_px_is_a_reference() -> None:
    """A full-page screenshot 1280 x 12000 would be a 400 for the whole request."""
    [message] = anthropic.tool_results(
        media_turn(inline("image/png", png(1280, 12000), "page.png"))
    )
    text = message["content"][0]["content"][1]["text"]
    assert "1280×12000 px" in text


@pytest.mark.parametrize(
    ("mime", "data"),
    [
        pytest.param("image/png", png(9000, 10), id="png"),
        pytest.param("image/gif", gif(9000, 10), id="gif"),
        pytest.param("image/jpeg", jpeg_header(9000, 10), id="jpeg"),
        pytest.param("image/jpeg", jpeg_header(9000, 10, exif_bytes=200_000), id="jpeg-big-exif"),
        pytest.param("image/webp", webp_header(9000, 10), id="webp-extended"),
        pytest.param("image/webp", webp_header(9000, 10, kind="VP8 "), id="webp-lossy"),
        pytest.param("image/webp", webp_header(9000, 10, kind="VP8L"), id="webp-lossless"),
    ],
)
def test_the_pixel_size_is_read_from_every_image_type(mime: str, data: bytes) -> None:
    """9000 px wide is over the 8000 px limit, whatever the format."""
    [message] = anthropic.tool_results(media_turn(inline(mime, data, "wide")))
    assert "9000×10 px" in message["content"][0]["content"][1]["text"]


def test_a_mislabelled_image_is_sent_as_what_it_is() -> None:
    """A PNG labelled image/jpeg goes as image/png: the API refuses a type that lies."""
    [message] = anthropic.tool_results(media_turn(inline("image/jpeg", png(), "a.jpg")))
    assert message["content"][0]["content"][1]["source"]["media_type"] == "image/png"


def test_bytes_that_are_no_image_are_a_reference() -> None:
    """The API would fail to decode them on this and every later request."""
    [message] = anthropic.tool_results(media_turn(inline("image/png", b"<html>", "x.png")))
    assert "the data is not a PNG image" in message["content"][0]["content"][1]["text"]


def test_past_20_images_only_images_within_2000_px_are_sent() -> None:
    """More than 20 images in a request each need sides of at most 2000 px."""
    small = [inline("image/png", png(100, 100), f"s{i}.png") for i in range(25)]
    [message] = anthropic.tool_results(media_turn(*small))
    kinds = [block["type"] for block in message["content"][0]["content"][1:]]
    assert kinds == ["image"] * 25
    large = [inline("image/jpeg", jpeg_header(2400, 1600), f"l{i}.jpg") for i in range(20)]
    [message] = anthropic.tool_results(
        media_turn(*large, inline("image/webp", webp_header(100, 100), "late.webp"))
    )
    blocks = message["content"][0]["content"][1:]
    assert [block["type"] for block in blocks] == ["image"] * 20 + ["text"]
    assert "at most 2000 px a side" in blocks[-1]["text"]


def test_earlier_turns_count_against_the_request_and_keep_their_form() -> None:
    """Images already sent stay sent; a later image that would pass 28 MB becomes text."""
    chunk = png(100, 100) + b"\0" * 3_500_000  # 4.7 MB of base64
    earlier = [media_turn(inline("image/png", chunk, f"e{i}.png")) for i in range(5)]
    latest = media_turn(
        inline("image/png", chunk, "late1.png"), inline("image/png", chunk, "late2.png")
    )
    [message] = anthropic.tool_results(latest, earlier=earlier)
    blocks = message["content"][0]["content"][1:]
    assert [block["type"] for block in blocks] == ["text", "text"]
    assert "per request" in blocks[0]["text"]
    [alone] = anthropic.tool_results(latest)
    assert [block["type"] for block in alone["content"][0]["content"][1:]] == ["image", "image"]


def test_earlier_takes_turns_not_one_turns_parts() -> None:
    """Passing one turn's parts as earlier is a TypeError that shows the fix."""
    turn = media_turn(inline("image/png", png()))
    with pytest.raises(TypeError, match=r"earlier=\[parts\]"):
        anthropic.tool_results(turn, earlier=turn.parts)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"\[turn\]"):
        anthropic.tool_results(turn, earlier=turn)  # type: ignore[arg-type]


def test_tool_results_from_parts_alone_equal_those_from_the_turn() -> None:
    """A resumed history has parts, not responses: the mapping is the same."""
    for turn in sample_turns().values():
        assert anthropic.tool_results(turn.parts) == anthropic.tool_results(turn)


def test_tool_calls_are_the_tool_use_blocks() -> None:
    """tool_use blocks are calls; text and server tool blocks are not."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": "{oops"},
        ],
    }
    from_dict = anthropic.tool_calls(body)
    sdk_body = {**body, "content": body["content"][:3]}  # the SDK types input as an object
    assert anthropic.tool_calls(anthropic_sdk.Message.model_validate(sdk_body)) == from_dict[:1]
    good, bad = from_dict
    assert (good.id, good.name, good.args, good.ordinal) == (
        "toolu_1",
        "read_file",
        {"path": "a"},
        0,
    )
    assert (bad.id, bad.ordinal) == ("toolu_2", 1)
    assert bad.invalid is not None
    assert "not valid JSON" in bad.invalid


def test_empty_and_unknown_replies() -> None:
    """No tool_use blocks: no calls; an error body: a ValueError naming the shape."""
    assert anthropic.tool_calls({"content": [{"type": "text", "text": "done"}]}) == []
    assert anthropic.tool_calls({"content": []}) == []
    with pytest.raises(ValueError, match="not an Anthropic Messages reply"):
        anthropic.tool_calls({"type": "error", "error": {"type": "overloaded_error"}})


def test_tool_definitions_are_tool_params() -> None:
    """The registry's declarations as Messages tools."""
    tools = anthropic.tool_definitions(default_registry())
    assert [t["name"] for t in tools] == ["run_shell_command"]
    for tool in tools:
        assert_conforms(tool, anthropic_sdk.ToolParam)
    assert turn_of([]).parts == []
