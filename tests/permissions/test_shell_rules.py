"""Issue 28's permission attacks, run for real: the scheduler, the shell, a marker file.

Each command would create a marker in the working directory if it ran. With ``allow:
Bash(git status:*)`` and an approver that says no, the injected ones must be asked (and
refused); with ``deny: Bash(touch:*)`` and an approver that says yes to anything, every
rewrite must be denied by the rule. Headless, what no allow rule covers is refused with the
allow rules named.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.permissions.test_bash import ALLOW_INJECTIONS, DENY_REWRITES
from toolbatch import (
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolScheduler,
    default_registry,
)
from toolbatch.permissions import PermissionMode


async def run(
    tmp_path: Path,
    command: str,
    settings: dict[str, object],
    *,
    answer: bool | None,
    asked: list[str] | None = None,
    mode: PermissionMode | None = None,
) -> ToolCallResponse:
    """Run one shell call in ``tmp_path/work``; ``answer`` is the approver's (``None``: no
    approver, a headless run)."""

    async def approve(call: ToolCall, declaration: ToolDeclaration) -> bool:
        assert answer is not None
        if asked is not None:
            asked.append(call.args["command"])  # type: ignore[arg-type]
        return answer

    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = SchedulerConfig(
        settings=settings,
        artifacts_dir=tmp_path / "artifacts",
        sandbox="off",
        permission_mode=mode,
    )
    async with ToolScheduler(default_registry(cwd=work), config) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="c", name="run_shell_command", args={"command": command})],
            approve=None if answer is None else approve,
        )
    return turn.responses[0]


def created(tmp_path: Path) -> list[str]:
    return sorted(path.name for path in (tmp_path / "work").iterdir())


@pytest.mark.parametrize("command", ALLOW_INJECTIONS)
async def test_allow_rules_ask_about_injected_commands(tmp_path: Path, command: str) -> None:
    """The approver is asked and says no: nothing ran, no marker."""
    asked: list[str] = []
    response = await run(
        tmp_path,
        command,
        {"permissions": {"allow": ["Bash(git status:*)"]}},
        answer=False,
        asked=asked,
    )
    assert response.error_type == "permission_denied"
    assert asked == [command]
    assert created(tmp_path) == []


@pytest.mark.parametrize("command", ALLOW_INJECTIONS)
async def test_allow_rules_refuse_injected_commands_headless(tmp_path: Path, command: str) -> None:
    """Nobody to ask: refused, the reason and the allow rules named, no marker."""
    response = await run(
        tmp_path, command, {"permissions": {"allow": ["Bash(git status:*)"]}}, answer=None
    )
    assert response.error_type == "permission_denied"
    assert response.error is not None
    assert "headless" in response.error
    assert "'Bash(git status:*)'" in response.error
    assert created(tmp_path) == []


@pytest.mark.parametrize("command", DENY_REWRITES)
async def test_deny_rules_hold_against_every_rewrite(tmp_path: Path, command: str) -> None:
    """An approver that says yes to everything changes nothing: the rule denies."""
    asked: list[str] = []
    response = await run(
        tmp_path,
        command,
        {"permissions": {"deny": ["Bash(touch:*)"]}},
        answer=True,
        asked=asked,
    )
    assert response.error_type == "permission_denied"
    assert response.error is not None
    assert "'Bash(touch:*)' (deny" in response.error
    assert asked == []
    assert created(tmp_path) == []


def test_the_rewrites_do_run_touch_without_the_rule(tmp_path: Path) -> None:
    """The fixed cases are real: without a deny rule, bash runs touch for each of them."""
    work = tmp_path / "work"
    work.mkdir()
    for command in DENY_REWRITES:
        subprocess.run(["bash", "-c", command], cwd=work, check=False, timeout=30)
        assert (work / "x").exists(), command
        (work / "x").unlink()


async def test_an_allowed_command_runs_and_a_covered_sequence_too(tmp_path: Path) -> None:
    """The allow list still lets through what it covers, headless."""
    settings = {"permissions": {"allow": ["Bash(echo:*)", "Bash(touch ok:*)"]}}
    response = await run(tmp_path, "echo hi && touch ok | echo piped", settings, answer=None)
    assert response.status == "success", response.error
    assert created(tmp_path) == ["ok"]


@pytest.mark.parametrize(
    ("mode", "answer", "ran", "asked_count"),
    [
        pytest.param("default", True, True, 1, id="default-asks"),
        pytest.param("dontAsk", True, False, 0, id="dontAsk-refuses"),
        pytest.param("bypassPermissions", False, True, 0, id="bypass-runs"),
        pytest.param("acceptEdits", False, True, 0, id="acceptEdits-touch"),
        pytest.param("plan", False, False, 1, id="plan-asks"),
    ],
)
async def test_modes_decide_what_no_rule_covers(
    tmp_path: Path, mode: PermissionMode, answer: bool, ran: bool, asked_count: int
) -> None:
    """default and plan ask; dontAsk refuses; bypassPermissions runs; acceptEdits runs
    plain file-system commands inside the working directory."""
    asked: list[str] = []
    settings = {"permissions": {"allow": ["Bash(ls:*)"], "deny": ["Bash(curl:*)"]}}
    response = await run(tmp_path, "touch made", settings, answer=answer, asked=asked, mode=mode)
    assert (response.status == "success") is ran, response.error
    assert created(tmp_path) == (["made"] if ran else [])
    assert len(asked) == asked_count


async def test_bypass_still_asks_ask_rules_and_holds_deny_rules(tmp_path: Path) -> None:
    """bypassPermissions: an explicit ask rule is asked, a deny rule denies."""
    asked: list[str] = []
    settings = {"permissions": {"ask": ["Bash(touch:*)"], "deny": ["Bash(rm:*)"]}}
    response = await run(
        tmp_path, "touch a", settings, answer=False, asked=asked, mode="bypassPermissions"
    )
    assert response.error_type == "permission_denied"
    assert asked == ["touch a"]
    response = await run(
        tmp_path, "rm -rf .", settings, answer=True, asked=asked, mode="bypassPermissions"
    )
    assert response.error is not None
    assert "'Bash(rm:*)' (deny" in response.error


async def test_without_rules_calls_run_as_before(tmp_path: Path) -> None:
    """No rules: headless runs the shell, as it always has."""
    response = await run(tmp_path, "touch free", {}, answer=None)
    assert response.status == "success"
    assert created(tmp_path) == ["free"]
