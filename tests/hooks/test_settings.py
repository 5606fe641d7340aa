"""A Claude Code project's .claude/settings.json, mixing hooks and permissions, run as is.

The project under tests/hooks/project has the hook scripts a Claude Code user writes (bash
and Python, reading the event's JSON on stdin) and a settings file with allow, ask and deny
rules; everything goes through the public API with real commands and a real MCP server.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.producers.mcp._support import TEST_SERVER
from toolbatch import (
    SchedulerConfig,
    ToolCall,
    ToolDeclaration,
    ToolScheduler,
    Turn,
    default_registry,
)
from toolbatch._core._wire import FunctionResponsePart, TextPart

PROJECT = Path(__file__).resolve().parent / "project"
SETTINGS = PROJECT / ".claude" / "settings.json"
MCP = {"mcpServers": {"t": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}


def body(turn: Turn, call_id: str) -> dict[str, Any]:
    response = next(r for r in turn.responses if r.call_id == call_id)
    part = response.parts[0]
    assert isinstance(part, FunctionResponsePart)
    return dict(part.function_response.response)


def texts(turn: Turn) -> list[str]:
    return [part.text for part in turn.parts if isinstance(part, TextPart)]


def shell(call_id: str, command: str) -> ToolCall:
    return ToolCall(id=call_id, name="run_shell_command", args={"command": command})


CALLS = [
    shell("ok", "echo hello"),
    shell("rm", "rm -rf build"),
    shell("force", "git push --force origin main"),
    shell("deploy", "make deploy prod"),
    shell("push", "git push origin main"),
    shell("curl", "curl http://127.0.0.1:9/"),
    shell("warn", "echo warning: unused import"),
    ToolCall(id="mcp-echo", name="mcp__t__echo", args={"text": "hi"}),
    ToolCall(id="mcp-env", name="mcp__t__env"),
    ToolCall(id="mcp-fail", name="mcp__t__fail", args={"message": "disk on fire"}),
    ToolCall(id="mcp-pid", name="mcp__t__pid"),
]


@pytest.fixture
def in_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT)  # $CLAUDE_PROJECT_DIR is the project directory


async def run(tmp_path: Path, **options: Any) -> Turn:
    config = SchedulerConfig(
        settings=SETTINGS, mcp_servers=MCP, artifacts_dir=tmp_path / "artifacts", sandbox="off"
    )
    async with ToolScheduler(default_registry(), config) as scheduler:
        return await scheduler.run_batch(CALLS, **options)


@pytest.mark.usefixtures("in_project")
async def test_a_claude_code_project_settings_file_runs_unchanged_headless(tmp_path: Path) -> None:
    """Each hook and each rule of the file does what Claude Code documents, headless."""
    turn = await run(tmp_path)
    status = {r.call_id: (r.status, r.error_type) for r in turn.responses}
    assert body(turn, "ok") == {"output": "hello\n"} or "hello" in str(body(turn, "ok"))
    assert status["ok"] == ("success", None)
    # PreToolUse: a JSON deny, an exit-2 block (stderr is the reason), both in place.
    assert status["rm"] == ("error", "permission_denied")
    assert "Destructive command blocked by hook" in body(turn, "rm")["error"]
    assert status["force"] == ("error", "permission_denied")
    assert "force pushes are not allowed here" in body(turn, "force")["error"]
    # updatedInput: the dry run ran instead, and its new command matches an allow rule.
    assert status["deploy"] == ("success", None)
    assert "would run: make deploy prod" in str(body(turn, "deploy"))
    # An ask rule with nobody to ask: denied, naming the rule and the file.
    assert status["push"] == ("error", "permission_denied")
    push = body(turn, "push")["error"]
    assert "'Bash(git push:*)' (ask, in " in push
    assert str(SETTINGS) in push
    assert "no approve callback" in push
    assert status["curl"] == ("error", "permission_denied")
    assert "'Bash(curl *)' (deny" in body(turn, "curl")["error"]
    # MCP: mcp__t allows the server; a deny rule and an ask rule name themselves.
    assert body(turn, "mcp-echo") == {"output": "hi"}
    assert "'mcp__t__env' (deny" in body(turn, "mcp-env")["error"]
    assert "'mcp__t__pid' (ask" in body(turn, "mcp-pid")["error"]
    assert status["mcp-fail"][0] == "error"
    # What hooks said is the turn's own text, after the results, in call order.
    said = texts(turn)
    assert said[0].startswith("[PreToolUse hook, call deploy (run_shell_command)] Deploys only")
    assert any("call warn" in t and "printed warnings" in t for t in said)
    assert any("call mcp-fail" in t and "failed (" in t and "interrupt=False" in t for t in said)
    assert said[-1] == "11 calls in this batch"
    assert turn.stop_reason is None
    # ...and never inside a tool's result.
    assert "printed warnings" not in str(body(turn, "warn"))


@pytest.mark.usefixtures("in_project")
async def test_approve_is_asked_for_what_rules_ask_and_its_failure_is_not_a_no(
    tmp_path: Path,
) -> None:
    """A sync approve answers the asks; one that raises gives approval_failed, not a no."""
    asked: list[str] = []

    def approve(call: ToolCall, declaration: ToolDeclaration) -> bool:
        asked.append(call.id)
        if call.id == "push":
            raise RuntimeError("the terminal went away")
        return call.id == "mcp-pid"

    turn = await run(tmp_path, approve=approve)
    status = {r.call_id: (r.status, r.error_type) for r in turn.responses}
    assert sorted(asked) == ["mcp-pid", "push"]  # only what asks: allow rules skip the shell's
    assert status["mcp-pid"] == ("success", None)
    assert status["push"] == ("error", "approval_failed")
    message = body(turn, "push")["error"]
    assert "RuntimeError: the terminal went away" in message
    assert "did not allow" not in message


@pytest.mark.usefixtures("in_project")
async def test_a_bare_deny_hides_a_tool_and_settings_merge_in_order(tmp_path: Path) -> None:
    """Lists merge across files (deny still wins over a later allow); a bare deny hides the
    tool from the model."""
    user = {"permissions": {"allow": ["Bash(curl *)", "mcp__t__env"]}}
    config = SchedulerConfig(
        settings=[user, SETTINGS], mcp_servers=MCP, artifacts_dir=tmp_path, sandbox="off"
    )
    async with ToolScheduler(default_registry(), config) as scheduler:
        names = {d.name for d in await scheduler.wait_for_tools()}
        turn = await scheduler.run_batch([shell("curl", "curl http://127.0.0.1:9/")])
    assert "mcp__t__env" not in names
    assert "mcp__t__echo" in names
    assert turn.responses[0].error_type == "permission_denied"
