"""The sandbox and environment flags: defined once for run, serve and acp, mapped to the config."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from tests.cli._support import run_toolbatch
from toolbatch.cli._options import _parser
from toolbatch.cli._runtime import _scheduler_config
from toolbatch.sandbox._landlock import abi_version


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
    assert config.workspace_roots == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert config.network is False
    assert config.protected_paths == [str(tmp_path / "keep.sh")]
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
    done = run_toolbatch("run", *argv, stdin=b"[]", cwd=tmp_path)
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
        done = run_toolbatch(
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
