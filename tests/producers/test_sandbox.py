"""The shell sandbox's Landlock layer alone (as where bubblewrap is missing): real commands,
real files, a real listener, checked on the filesystem. The namespaces layer, and both
together, are tested in ``test_sandbox_namespaces.py``.

Most tests use ``private_tmp=True`` so that pytest's ``tmp_path`` (under the system temp dir,
which ``workspace-write`` allows by default) is *outside* what commands may write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from toolbatch import ToolCall, ToolResult
from toolbatch.errors import ConfigError
from toolbatch.producers import ProcessPolicy, ProducerContext, ShellProducer, open_process_policy
from toolbatch.sandbox._landlock import abi_version
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

pytestmark = pytest.mark.skipif(
    abi_version() < 4, reason="needs Landlock ABI 4 (Linux 6.7) for the filesystem and TCP"
)

FAST: dict[str, Any] = {"kill_grace_s": 0.3, "drain_s": 0.3}


def landlock_only(**options: Any) -> contextlib.AbstractContextManager[ProcessPolicy]:
    """A policy on a host without bubblewrap (simulated): Landlock is the only layer."""
    return open_process_policy(
        namespaces_probe=lambda: (None, "bubblewrap is not installed (simulated)"), **options
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


@pytest.fixture
def home_dir() -> Iterator[Path]:
    """A fresh directory under the home directory (outside every default writable root)."""
    path = Path.home() / f".toolbatch-sandbox-test-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def sh(policy: ProcessPolicy, command: str, **args: Any) -> ToolResult:
    producer = ShellProducer(policy=policy, **FAST)
    call = ToolCall(id="c1", name="run_shell_command", args={"command": command, **args})
    return await producer.run(call, ProducerContext())


def _exit_line(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content.rsplit("\n", 1)[-1]


# -- workspace-write ------------------------------------------------------------------------


async def test_writes_inside_the_workspace_work_and_under_home_fail(
    workspace: Path, home_dir: Path
) -> None:
    """The default mode: the workspace is writable, the home directory is not."""
    with landlock_only(workspace_roots=[workspace]) as policy:
        inside = await sh(policy, f"echo kept > {workspace}/file && mkdir {workspace}/dir")
        denied = await sh(policy, f"echo lost > {home_dir}/file")
    assert _exit_line(inside) == "[exit code: 0]"
    assert (workspace / "file").read_text() == "kept\n"
    assert (workspace / "dir").is_dir()
    assert "Permission denied" in denied.content
    assert _exit_line(denied) == "[exit code: 1]"
    assert denied.error is None  # an ordinary command failure, for the model to read
    assert (
        f"[sandbox: workspace-write (landlock); writes allowed only under {workspace}"
        in denied.content
    )
    assert not (home_dir / "file").exists()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("echo x > {ws}/../outside/f", id="dot-dot"),
        pytest.param("cd {ws} && echo x > ../outside/f", id="relative-dot-dot"),
        pytest.param("ln -s {out} {ws}/link && echo x > {ws}/link/f", id="symlink-dir"),
        pytest.param("ln -s {out}/f {ws}/f-link && echo x > {ws}/f-link", id="symlink-file"),
        pytest.param("echo x > {ws}/f && mv {ws}/f {out}/f", id="rename-out"),
        pytest.param("echo x > {ws}/f && ln {ws}/f {out}/f", id="hard-link-out"),
        pytest.param("echo x > {ws}/f && cp {ws}/f {out}/f", id="copy-out"),
    ],
)
async def test_dot_dot_symlinks_and_renames_do_not_escape(
    workspace: Path, outside: Path, command: str
) -> None:
    """Paths are checked where the kernel resolves them: nothing lands outside."""
    with landlock_only(workspace_roots=[workspace], private_tmp=True) as policy:
        result = await sh(policy, command.format(ws=workspace, out=outside))
    assert _exit_line(result) != "[exit code: 0]"
    assert os.listdir(outside) == []


async def test_a_child_of_a_child_is_confined_even_outside_the_group(
    workspace: Path, outside: Path
) -> None:
    """Descendants inherit the sandbox: nested shells, Python, and a setsid escapee."""
    python = sys.executable
    command = (
        f"bash -c 'bash -c \"echo a > {outside}/a\"'; "
        f'{python} -c \'open("{outside}/b", "w")\'; '
        f"setsid -w bash -c 'echo c > {outside}/c'; "
        f"bash -c 'echo ok > {workspace}/nested'"
    )
    with landlock_only(workspace_roots=[workspace], private_tmp=True) as policy:
        result = await sh(policy, command)
    assert result.content.count("Permission denied") == 3
    assert os.listdir(outside) == []
    assert (workspace / "nested").read_text() == "ok\n"


async def test_the_artifact_dirs_and_devices_stay_writable(workspace: Path, outside: Path) -> None:
    """writable_dirs (the store's directories) and /dev/null are writable in workspace-write."""
    with landlock_only(
        workspace_roots=[workspace], writable_dirs=[outside], private_tmp=True
    ) as policy:
        result = await sh(policy, f"echo x > {outside}/artifact && echo y > /dev/null && echo ok")
    assert result.content == "ok\n[exit code: 0]"


async def test_the_system_temp_dir_is_writable_unless_private(
    workspace: Path, outside: Path
) -> None:
    """workspace-write allows the system temp dir; private_tmp narrows it to a private one."""
    target = outside / "in-system-tmp"  # tmp_path is under the system temp dir
    with landlock_only(workspace_roots=[workspace]) as policy:
        allowed = await sh(policy, f"echo x > {target}")
    with landlock_only(workspace_roots=[workspace], private_tmp=True) as policy:
        private = policy.temp_dir
        assert private is not None
        denied = await sh(policy, f'rm {target}; echo x > $TMPDIR/mine && echo "$TMPDIR"')
        assert (private / "mine").is_file()
    assert _exit_line(allowed) == "[exit code: 0]"
    assert target.is_file()  # rm was denied
    assert "Permission denied" in denied.content
    assert f"{private}\n[exit code: 0]" in denied.content
    assert not private.exists()  # removed when the policy closed


# -- read-only ------------------------------------------------------------------------------


async def test_read_only_blocks_the_workspace_but_not_its_private_tmp(workspace: Path) -> None:
    """read-only: reads work, writes fail everywhere but the private temp dir."""
    (workspace / "existing").write_text("before\n")
    with landlock_only(sandbox="read-only", workspace_roots=[workspace]) as policy:
        assert policy.temp_dir is not None
        read = await sh(policy, f"cat {workspace}/existing")
        written = await sh(
            policy,
            f"echo x > {workspace}/new; echo y >> {workspace}/existing; rm {workspace}/existing",
        )
        scratch = await sh(policy, 'echo x > "$TMPDIR/scratch" && cat "$TMPDIR/scratch"')
    assert read.content == "before\n[exit code: 0]"
    assert written.content.count("Permission denied") == 3
    assert "[sandbox: read-only (landlock); writes allowed only under" in written.content
    assert (workspace / "existing").read_text() == "before\n"
    assert not (workspace / "new").exists()
    assert scratch.content == "x\n[exit code: 0]"


# -- network --------------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A real TCP listener on 127.0.0.1 that accepts connections; yields its port."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.mark.parametrize(
    ("network", "connects"),
    [pytest.param(True, True, id="network-on"), pytest.param(False, False, id="network-off")],
)
async def test_network_false_denies_tcp_connect_and_bind(
    workspace: Path, listener: int, network: bool, connects: bool
) -> None:
    """network=False: a connect to a listener on 127.0.0.1 and a bind both fail."""
    python = sys.executable
    bind = f'{python} -c \'import socket; socket.socket().bind(("127.0.0.1", 0)); print("bound")\''
    command = f"(exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected); {bind}"
    with landlock_only(workspace_roots=[workspace], network=network) as policy:
        result = await sh(policy, command)
    assert ("connected" in result.content) is connects
    assert ("bound" in result.content) is connects
    if not connects:
        assert "connect: Permission denied" in result.content
        assert "TCP connect and bind denied" in result.content


# -- unsupported kernels --------------------------------------------------------------------


async def test_an_unsupported_kernel_warns_once_and_runs_unconfined(home_dir: Path) -> None:
    """No Landlock (simulated): one warning on open, then commands run without a sandbox."""
    with capture_logs() as logs, landlock_only(landlock_probe=lambda: 0, network=True) as policy:
        first = await sh(policy, f"echo one > {home_dir}/one")
        second = await sh(policy, f"echo two > {home_dir}/two")
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in warnings] == ["sandbox.unavailable"]
    assert "Landlock is not available" in warnings[0]["reason"]
    assert warnings[0]["consequence"] == "shell commands run without it"
    assert not policy.enforced
    assert _exit_line(first) == _exit_line(second) == "[exit code: 0]"
    assert (home_dir / "one").is_file()
    assert (home_dir / "two").is_file()


async def test_a_required_sandbox_refuses_every_command_when_unsupported(home_dir: Path) -> None:
    """sandbox_required on a kernel without Landlock: nothing runs, the reason is given."""
    with landlock_only(landlock_probe=lambda: 0, required=True) as policy:
        results = [await sh(policy, f"echo x > {home_dir}/f{n}") for n in range(2)]
    for result in results:
        assert result.error is not None
        assert result.error.type == "sandbox_unavailable"
        assert "workspace-write sandbox is required" in result.error.message
        assert "Landlock is not available" in result.error.message
    assert os.listdir(home_dir) == []


async def test_an_older_abi_enforces_what_it_can_and_says_what_not(
    workspace: Path, home_dir: Path, listener: int
) -> None:
    """ABI 3 (simulated) has no TCP rights: writes are confined, the network is not."""
    with (
        capture_logs() as logs,
        landlock_only(
            workspace_roots=[workspace], network=False, landlock_probe=lambda: 3
        ) as policy,
    ):
        result = await sh(
            policy,
            f"(exec 3<>/dev/tcp/127.0.0.1/{listener} && echo connected); echo x > {home_dir}/f",
        )
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "sandbox.partial"
    ]
    assert "connected" in result.content
    assert "Permission denied" in result.content
    assert "Landlock ABI 3 cannot enforce TCP connect and bind" in result.content
    assert not (home_dir / "f").exists()
    with landlock_only(
        workspace_roots=[workspace], network=False, required=True, landlock_probe=lambda: 3
    ) as policy:
        refused = await sh(policy, "true")
    assert refused.error is not None
    assert refused.error.type == "sandbox_unavailable"


def test_the_host_itself_is_never_confined(workspace: Path, home_dir: Path) -> None:
    """Only the spawner thread is confined: the host still writes anywhere afterwards."""
    with landlock_only(workspace_roots=[workspace]) as policy:
        assert policy.enforced
        (home_dir / "host").write_text("fine")
    assert (home_dir / "host").read_text() == "fine"


# -- through the scheduler ------------------------------------------------------------------


async def test_the_scheduler_sandboxes_by_default_in_the_current_directory(
    workspace: Path, home_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SchedulerConfig() is workspace-write with the cwd as workspace, artifacts read-only."""
    monkeypatch.chdir(workspace)
    artifacts = tmp_path / "artifacts"
    config = SchedulerConfig(artifacts_dir=artifacts, sandbox_private_tmp=True)
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        turn = await scheduler.run_batch(
            [
                ToolCall(id="in", name="run_shell_command", args={"command": "echo x > here"}),
                ToolCall(
                    id="out",
                    name="run_shell_command",
                    args={"command": f"echo x > {home_dir}/f"},
                ),
                ToolCall(
                    id="art",
                    name="run_shell_command",
                    args={"command": f"echo x > {artifacts}/note"},
                ),
            ]
        )
    here, out, art = turn.responses
    assert here.status == art.status == out.status == "success"
    assert (workspace / "here").is_file()
    assert not (artifacts / "note").exists()  # what the model reads back is the host's
    assert not (home_dir / "f").exists()
    assert "Read-only file system" in str(out.parts)
    assert "Read-only file system" in str(art.parts)
    assert "sandbox: workspace-write (bubblewrap + landlock" in str(out.parts)


async def test_sandbox_off_runs_commands_unconfined(tmp_path: Path, home_dir: Path) -> None:
    """sandbox="off": no confinement (the environment policy still applies)."""
    config = SchedulerConfig(artifacts_dir=tmp_path / "artifacts", sandbox="off")
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="c", name="run_shell_command", args={"command": f"echo x > {home_dir}/f"})]
        )
    assert turn.responses[0].status == "success"
    assert (home_dir / "f").is_file()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        pytest.param({"sandbox": "danger-full-access"}, "sandbox must be", id="mode"),
        pytest.param({"workspace_roots": "/work"}, "wrap a single path in a list", id="root-str"),
        pytest.param({"workspace_roots": [3]}, "not a directory path", id="root-int"),
        pytest.param({"network": "no"}, "network must be True or False", id="network"),
        pytest.param({"sandbox_required": 1}, "sandbox_required must be", id="required"),
        pytest.param({"sandbox_private_tmp": None}, "sandbox_private_tmp must be", id="tmp"),
        pytest.param({"shell_env": "all"}, "shell_env must be", id="env-mode"),
        pytest.param({"shell_env_allow": "AWS_*"}, "wrap a single name", id="allow-str"),
        pytest.param({"shell_env_allow": ["A=B"]}, "not a variable name", id="allow-eq"),
        pytest.param({"shell_env_set": ["CI=1"]}, "give a dict", id="set-list"),
        pytest.param({"shell_env_set": {"CI": 1}}, "must be a string", id="set-value"),
    ],
)
def test_bad_options_raise_config_error_naming_the_value(
    options: dict[str, Any], named: str
) -> None:
    """Each malformed option is a ConfigError that says what was given and the fix."""
    with pytest.raises(ConfigError, match=named):
        SchedulerConfig(**options)


async def test_a_workspace_root_that_is_not_a_directory_fails_on_open(tmp_path: Path) -> None:
    """A missing workspace root is found when the scheduler opens, with the path named."""
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts", workspace_roots=[tmp_path / "missing"]
    )
    with pytest.raises(ConfigError, match="missing' is not a directory"):
        async with ToolScheduler(Registry([ShellProducer()]), config):
            pass


async def test_abi_1_confines_writes_and_names_the_rights_it_lacks(
    workspace: Path, home_dir: Path
) -> None:
    """ABI 1 (simulated): no REFER or TRUNCATE, said once; plain writes are still denied."""
    with (
        capture_logs() as logs,
        landlock_only(workspace_roots=[workspace], landlock_probe=lambda: 1) as policy,
    ):
        result = await sh(policy, f"echo x > {workspace}/in; echo x > {home_dir}/out")
    (warning,) = [entry for entry in logs if entry["log_level"] == "warning"]
    assert warning["event"] == "sandbox.partial"
    assert "the write rights refer, truncate" in warning["reason"]
    assert (workspace / "in").is_file()
    assert not (home_dir / "out").exists()
    assert "Permission denied" in result.content
