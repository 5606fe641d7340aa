"""ACP as editors expect it: the MCP transports advertised, permission questions that say
who asked, "always allow" for a command prefix, and no `in_progress` for a call that never
ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.acp._support import RecordingClient, running_agent

SETTINGS = json.dumps({"permissions": {"ask": ["Bash(echo *)"], "deny": ["Bash(rm *)"]}})


def statuses(updates: list[dict[str, Any]]) -> list[str]:
    return [u["status"] for u in updates if u.get("status")]


async def test_initialize_advertises_http_and_sse_mcp_servers(tmp_path: Path) -> None:
    """A spec-following editor sends only the transports the agent advertises."""
    async with running_agent(tmp_path=tmp_path, initialize=False) as agent:
        hello = await agent.initialize()
    mcp = hello.agent_capabilities.mcp_capabilities
    assert (mcp.http, mcp.sse) == (True, True)


async def test_permission_questions_name_the_rule_and_remember_a_prefix(tmp_path: Path) -> None:
    """The question says which rule asked; "always allow" on `git status` covers `git status
    --short`, not `git log`; a rejected or denied call goes pending -> failed."""
    work = tmp_path / "work"
    work.mkdir()
    client = RecordingClient(["allow_once", "allow_always"], default="reject_once")
    async with running_agent("--settings", SETTINGS, tmp_path=tmp_path, client=client) as agent:
        session = await agent.new_session(work)
        assert await agent.prompt(session, "$ echo hi") == "end_turn"
        (asked,) = client.permission_requests
        assert asked["content"] == [
            "Asked by the permission rule 'Bash(echo *)' (ask, in settings[0] (inline JSON))."
        ]

        assert await agent.prompt(session, "$ git status") == "end_turn"
        always = client.permission_requests[1]
        # No rule names it: the allow list asks (settings have rules, none covers it).
        assert always["content"] == ["Asked by the allow list: no allow rule covers 'git status'."]
        assert "Always allow `git status` commands in this session" in always["option_names"]

        assert await agent.prompt(session, "$ git status --short\n$ git log -1\n$ rm x") == (
            "end_turn"
        )
        asked_about = [r["raw_input"]["command"] for r in client.permission_requests[2:]]
        assert asked_about == ["git log -1"]  # rejected (the default answer)
        ids = [u["toolCallId"] for u in agent.frames.tool_calls()][-3:]
        short, log, rm = (agent.frames.of_call(i) for i in ids)
        assert "in_progress" in statuses(short)
        assert statuses(log) == ["pending", "failed"]  # refused: it never ran
        assert statuses(rm) == ["pending", "failed"]  # denied by a rule
        assert "'Bash(rm *)' (deny" in json.dumps(rm[-1])
