"""Claude Code's documented hook examples (tests/hooks/claude_code_examples/) behave as under
Claude Code, through the Python API, `toolbatch run` and `toolbatch acp`: the validator
blocks `grep` (it acts only on tool_name == "Bash"), the jq hook blocks `drop table`, the
JSON hook denies `rm -rf`, and the PostToolUse log gets the commands that succeeded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.acp._support import RecordingClient, running_agent
from tests.cli._support import run_toolbatch
from toolbatch import SchedulerConfig, ToolCall, ToolScheduler, default_registry

EXAMPLES = Path(__file__).parent / "claude_code_examples"

COMMANDS = {
    "grep": "grep -n hooks README.md",
    "drop": "echo 'drop table users'",
    "rmrf": "rm -rf ./no-such-build-dir",
    "ok": "echo fine",
    "fails": "exit 3",
}


def check(outcome: dict[str, dict[str, Any]], log: Path) -> None:
    """What Claude Code does with these hooks and commands."""
    assert "Use 'rg' (ripgrep) instead of 'grep'" in outcome["grep"]["error"]
    assert "Blocked: dropping tables is not allowed" in outcome["drop"]["error"]
    assert "Destructive command blocked by hook" in outcome["rmrf"]["error"]
    assert outcome["ok"]["output"].startswith("fine")
    assert "error" not in outcome["fails"]  # it ran; its exit line tells the model
    # PostToolUse fires for what succeeded only (a non-zero exit is PostToolUseFailure).
    assert log.read_text() == "echo fine\n"


def calls() -> list[dict[str, Any]]:
    return [
        {"id": key, "name": "run_shell_command", "args": {"command": command}}
        for key, command in COMMANDS.items()
    ]


async def test_through_the_python_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)  # the project: $CLAUDE_PROJECT_DIR
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".claude").mkdir()
    config = SchedulerConfig(
        settings=".claude/settings.json", sandbox="off", artifacts_dir=tmp_path / "a"
    )
    async with ToolScheduler(default_registry(), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall.model_validate(c) for c in calls()])
    outcome = {}
    for response in turn.responses:
        part = response.parts[0]
        outcome[response.call_id] = dict(part.function_response.response)  # type: ignore[union-attr]
    check(outcome, tmp_path / ".claude" / "command-log.txt")


def test_through_toolbatch_run(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    done = run_toolbatch(
        "run",
        "--setting-sources",
        "project",
        "--output-format",
        "json",
        "--sandbox",
        "off",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(calls()).encode(),
        cwd=EXAMPLES,
        env={"HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr.decode()
    events = json.loads(done.stdout)
    parts = json.loads(next(e for e in events if e["type"] == "result")["result"])
    outcome = {p["functionResponse"]["id"]: p["functionResponse"]["response"] for p in parts}
    check(outcome, tmp_path / ".claude" / "command-log.txt")


async def test_through_acp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session in the examples project; the editor allows every command it is asked
    about; the hooks deny before anyone is asked."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".claude").mkdir()
    client = RecordingClient(default="allow_once")
    async with running_agent(
        "--setting-sources",
        "project",
        "--sandbox",
        "off",
        tmp_path=tmp_path,
        client=client,
        cwd=EXAMPLES,
    ) as agent:
        session = await agent.new_session(EXAMPLES)
        prompt = "\n".join(f"$ {command}" for command in COMMANDS.values())
        assert await agent.prompt(session, prompt) == "end_turn"
        frames = agent.frames
        ids = [u["toolCallId"] for u in frames.tool_calls()]
        ends = {key: frames.final(i) for key, i in zip(COMMANDS, ids, strict=True)}
    assert {key: end["status"] for key, end in ends.items()} == {
        "grep": "failed",
        "drop": "failed",
        "rmrf": "failed",
        "ok": "completed",
        "fails": "completed",
    }
    assert "Use 'rg'" in json.dumps(ends["grep"])
    assert len(client.permission_requests) == 2  # only the two commands the hooks let by
    assert (tmp_path / ".claude" / "command-log.txt").read_text() == "echo fine\n"
