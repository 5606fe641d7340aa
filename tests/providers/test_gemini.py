"""Gemini: the parts as they are, media the API cannot take as references, calls read.

Validated against the official ``google-genai`` types (pydantic models that forbid unknown
keys and read the camelCase wire names).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.providers._samples import (
    SAVED,
    big_png,
    gif,
    hook_turn,
    inline,
    media_turn,
    png,
    sample_turns,
    wav,
)
from tests.providers._sdk import genai
from toolbatch import SchedulerConfig, ToolScheduler, default_registry, parts_adapter
from toolbatch.providers import gemini


@pytest.mark.parametrize("name", list(sample_turns()))
def test_every_part_is_a_gemini_part(name: str) -> None:
    """Each part validates against google.genai.types.Part."""
    for part in gemini.tool_results(sample_turns()[name]):
        genai.Part.model_validate(part)


def test_the_parts_are_sent_as_they_are() -> None:
    """Function responses, audio, images, file references and text keep their wire form."""
    turn = media_turn(inline("audio/wav", wav(), "speech.wav"), inline("image/png", png(), "p.png"))
    assert gemini.tool_results(turn) == parts_adapter.dump_python(turn.parts, mode="json")
    for turn in (hook_turn(), sample_turns()["file reference"]):
        assert gemini.tool_results(turn) == parts_adapter.dump_python(turn.parts, mode="json")


def test_a_gif_and_a_30_mb_image_become_references_in_place() -> None:
    """A type Gemini does not list, and media over the request's inline limit, are text."""
    turn = media_turn(
        inline("image/gif", gif(), "a.gif"), inline("image/png", big_png(), "big.png")
    )
    response, gif_ref, big_ref = gemini.tool_results(turn)
    assert response["functionResponse"]["response"] == {"output": "screenshot taken"}
    assert "takes only PNG, JPEG, WebP, HEIC and HEIF images" in gif_ref["text"]
    assert str(SAVED / "big.png") in big_ref["text"]
    assert len(json.dumps(big_ref)) < 1_000


def test_tool_calls_from_a_response_a_content_or_parts() -> None:
    """functionCall parts in order, camelCase or snake_case; a missing id is made up."""
    parts = [
        {"text": "checking"},
        {"functionCall": {"id": "fc1", "name": "read_file", "args": {"path": "a"}}},
        {"function_call": {"name": "ls", "args": {}}},
    ]
    response = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    calls = gemini.tool_calls(response)
    assert [(c.id, c.name, c.args) for c in calls] == [
        ("fc1", "read_file", {"path": "a"}),
        ("call_1", "ls", {}),
    ]
    assert gemini.tool_calls({"parts": parts}) == calls
    assert gemini.tool_calls(parts) == calls
    assert gemini.tool_calls(genai.GenerateContentResponse.model_validate(response)) == calls


async def test_a_call_without_an_id_never_takes_the_id_of_another_call(tmp_path: Path) -> None:
    """The made-up id of a call without one is not ``call_0`` when the model's own second
    call is ``call_0``: both calls run, neither is answered as a duplicate."""
    parts = [
        {"functionCall": {"name": "run_shell_command", "args": {"command": "echo first"}}},
        {
            "functionCall": {
                "id": "call_0",
                "name": "run_shell_command",
                "args": {"command": "echo second"},
            }
        },
    ]
    calls = gemini.tool_calls(parts)
    assert len({call.id for call in calls}) == 2
    config = SchedulerConfig(artifacts_dir=tmp_path, sandbox="off")
    async with ToolScheduler(default_registry(), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert [r.status for r in turn.responses] == ["success", "success"]
    outputs = [str(r.parts[0].model_dump(by_alias=True)) for r in turn.responses]
    assert "first" in outputs[0]
    assert "second" in outputs[1]


def test_bad_args_empty_and_unknown_replies() -> None:
    """Args that are not an object make an invalid call; no candidates: no calls."""
    [call] = gemini.tool_calls([{"functionCall": {"id": "x", "name": "f", "args": "[1]"}}])
    assert call.invalid is not None
    assert "must be a JSON object" in call.invalid
    assert gemini.tool_calls({"candidates": []}) == []
    assert gemini.tool_calls({"candidates": [{"finishReason": "SAFETY"}]}) == []
    with pytest.raises(ValueError, match="not a Gemini reply"):
        gemini.tool_calls({"error": {"code": 429}})


def test_tool_definitions_are_one_gemini_tool() -> None:
    """All declarations in one Tool's functionDeclarations, schemas as JSON Schema."""
    from toolbatch import default_registry

    [tool] = gemini.tool_definitions(default_registry())
    genai.Tool.model_validate(tool)
    [declaration] = tool["functionDeclarations"]
    assert declaration["name"] == "run_shell_command"
    assert declaration["parametersJsonSchema"]["type"] == "object"
    assert gemini.tool_definitions([]) == []
