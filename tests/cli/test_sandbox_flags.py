"""The sandbox and environment flags: defined once for run, serve and acp, mapped to the config."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from tests.cli._support import Service, invoke_toolbatch, run_toolbatch
from tests.strategies import scaled
from toolbatch.cli._options import _parser
from toolbatch.cli._runtime import _acp_options, _scheduler_config
from toolbatch.finalize import DEFAULT_BATCH_BUDGET_CHARS
from toolbatch.sandbox import CommandLineFlag, SandboxOptions, find_bubblewrap, sandbox_flags
from toolbatch.sandbox._landlock import abi_version
from toolbatch.scheduler import SchedulerConfig

RUNTIME_COMMANDS = ("run", "serve", "acp")


def _session_config(command: str, argv: list[str]) -> SchedulerConfig:
    """The configuration ``toolbatch COMMAND ARGV`` runs its sessions with."""
    args = _parser().parse_args([command, *argv])
    return _acp_options(args).config if command == "acp" else _scheduler_config(args)


def _sandbox_of(config: SchedulerConfig) -> dict[str, object]:
    return {option.name: getattr(config, option.name) for option in fields(SandboxOptions)}


@pytest.mark.parametrize("command", ["run", "serve", "acp"])
def test_the_flags_map_to_the_scheduler_config(command: str, tmp_path: Path) -> None:
    """Every flag lands in SchedulerConfig, the same way on every runtime command."""
    args = _parser().parse_args(
        [
            command,
            "--sandbox",
            "read-only",
            "--workspace",
            str(tmp_path / "a"),
            "--workspace",
            str(tmp_path / "b"),
            "--no-network",
            "--protect",
            str(tmp_path / "keep.sh"),
            "--sandbox-private-tmp",
            "--sandbox-required",
            "--shell-env",
            "minimal",
            "--shell-env-allow",
            "AWS_*",
            "--shell-env-allow",
            "CI",
            "--shell-env-set",
            "MODE=test=1",
        ]
    )
    config = _scheduler_config(args)
    assert config.sandbox == "read-only"
    assert config.workspace_roots == (str(tmp_path / "a"), str(tmp_path / "b"))
    assert config.network is False
    assert config.protected_paths == (str(tmp_path / "keep.sh"),)
    assert config.sandbox_private_tmp is True
    assert config.sandbox_required is True
    assert config.shell_env == "minimal"
    assert config.shell_env_allow == ("AWS_*", "CI")
    assert config.shell_env_set == {"MODE": "test=1"}


def test_the_defaults_are_workspace_write_in_the_current_directory() -> None:
    """No flags: workspace-write, cwd as workspace, network off, the inherit policy."""
    config = _scheduler_config(_parser().parse_args(["run"]))
    assert config.sandbox == "workspace-write"
    assert config.workspace_roots is None
    assert config.network is False
    assert _scheduler_config(_parser().parse_args(["run", "--network"])).network is True
    assert config.sandbox_required is False
    assert config.shell_env == "inherit"
    assert config.shell_env_allow == ()
    assert config.shell_env_set == {}
    assert config.protected_paths == ()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--sandbox", "full"], "invalid choice: 'full'", id="sandbox"),
        pytest.param(["--shell-env", "all"], "invalid choice: 'all'", id="shell-env"),
        pytest.param(["--shell-env-set", "CI"], "must be NAME=VALUE, got 'CI'", id="set"),
    ],
)
def test_bad_values_are_usage_errors(argv: list[str], message: str, tmp_path: Path) -> None:
    """A bad mode or assignment exits 2 with the value on stderr."""
    done = invoke_toolbatch("run", *argv, stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr.decode()


@pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI 4")
def test_run_confines_commands_to_the_workspace_and_hides_secrets(tmp_path: Path) -> None:
    """``toolbatch run --workspace DIR``: a write there works, one in $HOME is denied."""
    home_target = Path.home() / f".toolbatch-cli-test-{uuid.uuid4().hex[:8]}"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    batch = [
        {"id": "in", "name": "run_shell_command", "args": {"command": "echo x > inside"}},
        {"id": "out", "name": "run_shell_command", "args": {"command": f"echo x > {home_target}"}},
        {"id": "env", "name": "run_shell_command", "args": {"command": "env"}},
    ]
    env_key = "TOOLBATCH_CLI_TEST_API_KEY"
    os.environ[env_key] = "canary-value"
    try:
        done = invoke_toolbatch(
            "run",
            "--workspace",
            str(workspace),
            "--sandbox-private-tmp",
            "--artifacts-dir",
            str(tmp_path / "artifacts"),
            stdin=json.dumps(batch).encode(),
            cwd=workspace,
        )
    finally:
        del os.environ[env_key]
        home_target.unlink(missing_ok=True)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert (workspace / "inside").is_file()
    assert "Read-only file system" in out
    assert "sandbox: workspace-write (bubblewrap + landlock" in out
    assert "canary-value" not in out


def test_every_sandbox_option_is_a_config_field_and_a_flag_of_run_serve_and_acp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One declaration: each SandboxOptions field is a SchedulerConfig field of the same
    name and default, and its flag (and negation) is in run's, serve's and acp's help."""
    from toolbatch.cli import main

    declared = dict(sandbox_flags())
    assert list(declared) == [option.name for option in fields(SandboxOptions)]
    defaults = SandboxOptions()
    config = SchedulerConfig()
    for name in declared:
        assert getattr(config, name) == getattr(defaults, name)
    for command in RUNTIME_COMMANDS:
        assert main([command, "--help"]) == 0
        usage = capsys.readouterr().out
        for cli in declared.values():
            assert f"[{cli.flag}" in usage, (command, cli.flag)
            if cli.negation is not None:
                assert f"[{cli.negation}]" in usage, (command, cli.negation)


_WORDS = st.from_regex(r"[A-Za-z0-9_./*]{1,12}", fullmatch=True)
_NAMES = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
_VALUES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=8
)


def _flag_use(cli: CommandLineFlag) -> st.SearchStrategy[tuple[list[str], Any]]:
    """Some use of the flag ``cli`` on the command line, and the option value it means."""
    if cli.kind == "choice":
        return st.sampled_from(cli.choices).map(lambda value: ([f"{cli.flag}={value}"], value))
    if cli.kind == "switch":
        off = [cli.negation] if cli.negation is not None else []
        return st.sampled_from([([cli.flag], True), (off, False)])
    if cli.kind == "list":
        return st.lists(_WORDS, min_size=1, max_size=3).map(
            lambda values: ([f"{cli.flag}={value}" for value in values], tuple(values))
        )
    return st.lists(st.tuples(_NAMES, _VALUES), min_size=1, max_size=3).map(
        lambda pairs: ([f"{cli.flag}={name}={value}" for name, value in pairs], dict(pairs))
    )


@st.composite
def _sandbox_argv(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """Sandbox flags, in any order, and the options they mean (the others keep defaults)."""
    expected = {
        option.name: getattr(SandboxOptions(), option.name) for option in fields(SandboxOptions)
    }
    uses = []
    for name, cli in sandbox_flags():
        if draw(st.booleans()):
            argv, value = draw(_flag_use(cli))
            uses.append(argv)
            expected[name] = value
    return [word for use in draw(st.permutations(uses)) for word in use], expected


@settings(max_examples=scaled(100))
@given(_sandbox_argv())
def test_run_serve_and_acp_give_the_sandbox_flags_the_same_meaning(
    case: tuple[list[str], dict[str, Any]],
) -> None:
    """Whatever sandbox flags are given, run, serve and acp sessions get the same options."""
    argv, expected = case
    for command in RUNTIME_COMMANDS:
        assert _sandbox_of(_session_config(command, argv)) == expected, command


@pytest.mark.parametrize(
    ("argv", "budget"),
    [
        pytest.param([], DEFAULT_BATCH_BUDGET_CHARS, id="default"),
        pytest.param(["--budget", "12000"], 12_000, id="chars"),
        pytest.param(["--budget", "1_500"], 1_500, id="underscores"),
        pytest.param(["--budget", "0"], None, id="zero-disables"),
    ],
)
def test_budget_is_one_value_on_run_serve_and_acp(argv: list[str], budget: int | None) -> None:
    """``--budget`` is the session's budget, normalised where it is parsed, on every command."""
    for command in RUNTIME_COMMANDS:
        config = _session_config(command, argv)
        assert config.budget == budget, command
        assert config.batch_budget == budget, command


_WRITE = 'echo x > kept.txt; echo "mark=$MARK"'
"""Writes a protected file, then shows a variable the flags set."""


def _write_with_run(workspace: Path, flags: list[str]) -> str:
    batch = [{"id": "w", "name": "run_shell_command", "args": {"command": _WRITE}}]
    done = run_toolbatch("run", *flags, stdin=json.dumps(batch).encode(), cwd=workspace)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _write_with_serve(workspace: Path, flags: list[str]) -> str:
    service = Service(*flags, cwd=workspace)
    try:
        calls = [{"id": "w", "name": "run_shell_command", "args": {"command": _WRITE}}]
        answer = service.call("batch/run", {"calls": calls})
    finally:
        service.stop()
    (response,) = answer["result"]["responses"]
    return json.dumps(response["parts"])


def _write_with_acp(workspace: Path, flags: list[str]) -> str:
    from tests.acp._support import running_agent

    async def prompt() -> str:
        async with running_agent("--auto-approve", *flags, tmp_path=workspace.parent) as agent:
            session = await agent.new_session(workspace)
            assert await agent.prompt(session, f"$ {_WRITE}") == "end_turn"
            (call,) = agent.frames.tool_calls()
            return json.dumps(agent.frames.final(call["toolCallId"]))

    return anyio.run(prompt)


@pytest.mark.skipif(find_bubblewrap()[0] is None, reason="needs bubblewrap")
@pytest.mark.parametrize(
    "write", [_write_with_run, _write_with_serve, _write_with_acp], ids=RUNTIME_COMMANDS
)
def test_the_sandbox_flags_confine_commands_alike_on_every_command(
    write: Any, tmp_path: Path
) -> None:
    """``--protect FILE --shell-env-set MARK=seen``: whether the command came through run,
    serve or acp, the file stays as it was and the command sees the variable."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    kept = workspace / "kept.txt"
    kept.write_text("original\n")
    flags = ["--protect", str(kept), "--shell-env-set", "MARK=seen"]
    shown = write(workspace, [*flags, "--artifacts-dir", str(tmp_path / "artifacts")])
    assert kept.read_text() == "original\n"
    assert "Read-only file system" in shown
    assert "mark=seen" in shown
