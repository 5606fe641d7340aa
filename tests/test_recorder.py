"""The JSONL transcript: write-ahead, exact parts, tolerant of torn lines and old formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from toolbatch import (
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
    Turn,
    parts_adapter,
)
from toolbatch.errors import ConfigError, RecorderError
from toolbatch.recorder import JsonlRecorder, load_session


def _turn(*outputs: str, files: tuple[Path, ...] | None = None) -> Turn:
    responses = []
    for i, output in enumerate(outputs):
        call = ToolCall(id=f"c{i}", name="t")
        result = ToolResult(content=output, persisted_output_files=files)
        responses.append(ToolCallResponse.from_result(call, result))
    return Turn(responses=responses, parts=[p for r in responses for p in r.parts])


def _wire(parts: list) -> str:  # type: ignore[type-arg]
    # json.dumps, not pydantic's dump_json: the text may hold lone surrogates.
    return json.dumps(parts_adapter.dump_python(parts, by_alias=True, exclude_none=True))


async def test_recorded_parts_equal_sent_parts_byte_for_byte(tmp_path: Path) -> None:
    """load_session gives back parts whose JSON is identical to what was recorded."""
    image = InlineDataPart.model_validate({"inlineData": {"mimeType": "image/png", "data": "QQ=="}})
    tricky = "ünïcödé 😀 \u2028 \ud83d lone \x00 nul"
    turn = _turn("plain", tricky)
    turn = Turn(responses=turn.responses, parts=[*turn.parts, image, TextPart(text="tail")])
    recorder = JsonlRecorder(tmp_path / "s.jsonl")
    await recorder.record_turn(turn)
    [entry] = load_session(tmp_path / "s.jsonl")
    assert _wire(entry.parts) == _wire(turn.parts)


async def test_recorder_only_metadata_is_restored(tmp_path: Path) -> None:
    """persisted_output_files and status come back from recorder-only fields."""
    path = tmp_path / "s.jsonl"
    artifact = tmp_path / "a.txt"
    await JsonlRecorder(path).record_turn(_turn("x", files=(artifact,)), kinds=["duplicate"])
    [entry] = load_session(path)
    [response] = entry.responses
    assert response.persisted_output_files == (artifact,)
    assert entry.kinds == ["duplicate"]
    raw = json.loads(path.read_text().splitlines()[0])
    assert "persisted_output_files" not in json.dumps(raw["parts"])


async def test_turns_are_appended_in_order_across_recorders(tmp_path: Path) -> None:
    """A second recorder on the same file continues the sequence (resume)."""
    path = tmp_path / "s.jsonl"
    await JsonlRecorder(path).record_turn(_turn("one"))
    await JsonlRecorder(path).record_turn(_turn("two"))
    entries = load_session(path)
    assert [e.seq for e in entries] == [1, 2]
    assert [
        e.responses[0].parts[0].model_dump()["functionResponse"]["response"] for e in entries
    ] == [  # type: ignore[union-attr]
        {"output": "one"},
        {"output": "two"},
    ]


async def test_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A crash mid-append leaves a torn line: load skips it, nothing before it is lost."""
    path = tmp_path / "s.jsonl"
    await JsonlRecorder(path).record_turn(_turn("kept"))
    with path.open("a") as handle:
        handle.write('{"type": "tool_turn", "parts": [{"te')
    with capture_logs() as logs:
        entries = load_session(path)
    assert len(entries) == 1
    assert any(log["event"] == "recorder.torn_last_line" for log in logs)


async def test_appending_after_a_torn_line_cuts_it_first(tmp_path: Path) -> None:
    """Resuming on a torn transcript removes the partial record before appending."""
    path = tmp_path / "s.jsonl"
    await JsonlRecorder(path).record_turn(_turn("first"))
    with path.open("a") as handle:
        handle.write('{"type": "tool_turn", "par')
    await JsonlRecorder(path).record_turn(_turn("second"))
    entries = load_session(path)
    assert len(entries) == 2
    assert all(line.startswith("{") for line in path.read_text().splitlines())


def test_an_old_format_transcript_still_loads(tmp_path: Path) -> None:
    """Records without v, seq, kind, part_count or persisted_output_files load with defaults."""
    path = tmp_path / "old.jsonl"
    old = {
        "type": "tool_turn",
        "parts": [{"functionResponse": {"id": "c", "name": "t", "response": {"output": "hi"}}}],
        "responses": [{"call_id": "c", "name": "t", "part_count": 1}],
    }
    path.write_text(json.dumps(old) + "\n" + json.dumps({"parts": [{"text": "no type"}]}) + "\n")
    entries = load_session(path)
    assert len(entries) == 2
    [response] = entries[0].responses
    assert response.status == "success"
    assert response.persisted_output_files is None
    assert response.content_length == 2


async def test_messages_are_recorded_with_their_tool_calls(tmp_path: Path) -> None:
    """User and model messages (with the model's calls) round-trip for resume."""
    path = tmp_path / "s.jsonl"
    recorder = JsonlRecorder(path)
    await recorder.record_message("user", [TextPart(text="list files")])
    call = ToolCall(id="c1", name="run_shell_command", args={"command": "ls"})
    await recorder.record_message("model", [TextPart(text="")], tool_calls=[call])
    user, model = load_session(path)
    assert user.role == "user"
    assert model.tool_calls == [call]


def test_unreadable_transcript_is_a_recorder_error(tmp_path: Path) -> None:
    """A missing transcript raises RecorderError naming the path."""
    with pytest.raises(RecorderError, match=r"nope\.jsonl"):
        load_session(tmp_path / "nope.jsonl")


async def test_unwritable_transcript_is_a_recorder_error(tmp_path: Path) -> None:
    """A transcript path under a file raises RecorderError, not a bare OSError."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RecorderError):
        await JsonlRecorder(blocker / "s.jsonl").record_turn(_turn("x"))


async def test_kinds_of_the_wrong_length_are_a_config_error(tmp_path: Path) -> None:
    """One kind per response: a mismatch names both counts and records nothing."""
    recorder = JsonlRecorder(tmp_path / "s.jsonl")
    turn = Turn(responses=[], parts=[])
    with pytest.raises(ConfigError, match="kinds has 1 entries for 0 responses"):
        await recorder.record_turn(turn, kinds=["executed"])
    assert not (tmp_path / "s.jsonl").exists() or (tmp_path / "s.jsonl").read_text() == ""
