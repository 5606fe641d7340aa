"""A running command's latest output lines reach the editor while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolbatch.acp._updates import OUTPUT_TAIL_LINE_CHARS, OUTPUT_TAIL_LINES, OutputTail

from ._support import running_agent


def _texts(updates: list[dict[str, Any]]) -> list[str]:
    return [
        block["content"]["text"]
        for update in updates
        if update.get("status") == "in_progress"
        for block in update.get("content") or []
    ]


async def test_a_running_command_shows_its_latest_lines(tmp_path: Path) -> None:
    """tool_call updates carry the output lines as they come, not only a byte count."""
    async with running_agent("--auto-approve", tmp_path=tmp_path) as agent:
        session = await agent.new_session(tmp_path)
        command = "for i in 1 2 3; do echo line $i; sleep 0.7; done"
        assert await agent.prompt(session, f"$ {command}") == "end_turn"
        (started,) = agent.frames.tool_calls()
        updates = agent.frames.of_call(started["toolCallId"])
    running = _texts(updates)
    # Shown while it ran: the first line alone, then two, before the third was printed.
    assert "line 1" in running
    assert any(text.startswith("line 1\nline 2") and "line 3" not in text for text in running)
    assert updates[-1]["status"] == "completed"


def test_the_tail_keeps_the_latest_lines_bounded() -> None:
    """At most OUTPUT_TAIL_LINES lines of at most OUTPUT_TAIL_LINE_CHARS, then the report."""
    tail = OutputTail()
    tail.feed("".join(f"line {i}\n" for i in range(100)))
    tail.feed("x" * (OUTPUT_TAIL_LINE_CHARS * 3) + "\npart")
    tail.feed("ial")
    tail.report("2 KiB of output so far")
    lines = tail.text().split("\n")
    assert len(lines) == OUTPUT_TAIL_LINES + 1
    assert lines[-2:] == ["partial", "[2 KiB of output so far]"]
    assert lines[-3] == "x" * (OUTPUT_TAIL_LINE_CHARS - 1) + "…"
    assert lines[0] == f"line {100 - OUTPUT_TAIL_LINES + 2}"
