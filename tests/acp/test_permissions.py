"""Permission rules through ACP (issue 28): the editor is asked about injected commands, and
``--auto-approve`` still asks it for ``ask`` rules."""

from __future__ import annotations

import json
from pathlib import Path

from ._support import RecordingClient, running_agent


def settings_file(tmp_path: Path) -> Path:
    path = tmp_path / "settings.json"
    rules = {"allow": ["Bash(git status:*)"], "ask": ["Bash(touch asked*)"]}
    path.write_text(json.dumps({"permissions": rules}))
    return path


async def test_the_editor_is_asked_about_injected_commands(tmp_path: Path) -> None:
    """allow: Bash(git status:*) does not cover `git status <(touch M)`: the editor is
    asked, says no, and no marker appears."""
    work = tmp_path / "work"
    work.mkdir()
    client = RecordingClient(default="reject_once")
    settings = settings_file(tmp_path)
    async with running_agent(
        "--settings", str(settings), tmp_path=tmp_path, client=client
    ) as agent:
        session = await agent.new_session(work)
        assert await agent.prompt(session, "$ git status <(touch M)") == "end_turn"
        ansi = "git status $'\\'' ; touch M ; echo $'\\''"
        assert await agent.prompt(session, f"$ {ansi}") == "end_turn"
    asked = [request["raw_input"]["command"] for request in client.permission_requests]
    assert "git status <(touch M)" in asked
    assert ansi in asked
    assert list(work.iterdir()) == []


async def test_auto_approve_still_asks_the_editor_for_ask_rules(tmp_path: Path) -> None:
    """--auto-approve runs what no rule asks about without asking, and asks the rest."""
    work = tmp_path / "work"
    work.mkdir()
    client = RecordingClient(default="reject_once")
    settings = settings_file(tmp_path)
    flags = ["--auto-approve", "--settings", str(settings)]
    async with running_agent(*flags, tmp_path=tmp_path, client=client) as agent:
        session = await agent.new_session(work)
        assert await agent.prompt(session, "$ touch asked.txt") == "end_turn"
        assert await agent.prompt(session, "$ touch free.txt") == "end_turn"
    asked = [request["raw_input"]["command"] for request in client.permission_requests]
    assert asked == ["touch asked.txt"]
    assert sorted(path.name for path in work.iterdir()) == ["free.txt"]
