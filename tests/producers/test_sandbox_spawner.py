"""The session's spawner: one ``bwrap`` per session starts every command (real ``bwrap``,
real processes). What holds per command (namespaces, Landlock, seccomp, stopping) is in
``test_sandbox_namespaces.py``; here is what sharing one sandbox changes and must not."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from structlog.testing import capture_logs

from tests.strategies import scaled
from toolbatch import ToolCall, ToolResult
from toolbatch.producers import (
    ProcessPolicy,
    ProducerContext,
    ShellProducer,
    open_process_policy,
    without_exit_line,
)
from toolbatch.sandbox import find_bubblewrap
from toolbatch.sandbox._spawner import Spawner

BWRAP, NO_BWRAP = find_bubblewrap()
pytestmark = pytest.mark.skipif(BWRAP is None, reason=f"needs bubblewrap: {NO_BWRAP}")

FAST: dict[str, Any] = {"kill_grace_s": 0.3, "drain_s": 0.3}


async def sh(policy: ProcessPolicy, command: str, **options: Any) -> ToolResult:
    producer = ShellProducer(policy=policy, **FAST, **options)
    call = ToolCall(id="c", name="run_shell_command", args={"command": command})
    return await producer.run(call, ProducerContext())


def _marked(marker: str) -> list[int]:
    """Pids of the processes whose environment holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_session_shares_one_pid_namespace_and_sessions_do_not(tmp_path: Path) -> None:
    """Commands of one session see the same PID namespace (the same trust domain); another
    session's commands and the host are in others."""
    namespace = "readlink /proc/self/ns/pid"
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        first, second = await sh(policy, namespace), await sh(policy, namespace)
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        other = await sh(policy, namespace)
    assert first.content == second.content
    assert first.content != other.content
    assert os.readlink("/proc/self/ns/pid") not in (first.content, other.content)


async def test_each_command_gets_only_its_own_three_descriptors(tmp_path: Path) -> None:
    """No descriptor of the host, the spawner or another command leaks into a command."""
    fds = "sleep 0.2; ls /proc/self/fd | tr '\\n' ' '"
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        results: list[ToolResult] = []

        async def run() -> None:
            results.append(await sh(policy, fds))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(run)
    assert [result.content for result in results] == ["0 1 2 3 \n[exit code: 0]"] * 3


async def test_each_command_gets_its_own_cwd_and_environment(tmp_path: Path) -> None:
    """The session's commands run where and with what environment each call says."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        one = ShellProducer(policy=policy, env={"WHO": "one", "PATH": os.defpath}, **FAST)
        two = ShellProducer(policy=policy, env={"WHO": "two", "PATH": os.defpath}, **FAST)
        show = "pwd; echo $WHO"
        results = [
            await producer.run(
                ToolCall(id="c", name="run_shell_command", args={"command": show, "cwd": cwd}),
                ProducerContext(),
            )
            for producer, cwd in ((one, str(tmp_path / "a")), (two, str(tmp_path / "b")))
        ]
    assert results[0].content == f"{tmp_path / 'a'}\none\n[exit code: 0]"
    assert results[1].content == f"{tmp_path / 'b'}\ntwo\n[exit code: 0]"


async def test_killing_or_stopping_ppid_costs_only_that_commands_status(tmp_path: Path) -> None:
    """$PPID is the command's supervisor: killing it loses that command's exit status (a
    clear error, its output kept), stopping it changes nothing; the next command runs."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        killed = await sh(policy, "kill -9 $PPID; echo alive")
        started = time.monotonic()
        stopped = await sh(policy, "kill -STOP $PPID; echo still; exit 3")
        took_s = time.monotonic() - started
        after = await sh(policy, "echo after")
    assert killed.error is not None
    assert killed.error.type == "execution_failed"
    assert "supervisor" in killed.error.message
    assert "alive\n[exit status unknown]" in killed.content
    assert stopped.content == "still\n[exit code: 3]"
    assert took_s < 8  # resumed within 0.25 s; the margin is for a loaded machine
    assert after.content == "after\n[exit code: 0]"


async def test_a_spawned_command_that_closes_its_output_early_still_times_out(
    tmp_path: Path,
) -> None:
    """Output closed at once, the shell still running: the timeout stops it, and the
    session's next command runs."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        result = await sh(
            policy, "echo before; exec >/dev/null 2>&1; sleep 30", default_timeout_s=0.3
        )
        after = await sh(policy, "echo after")
    assert result.error is not None
    assert result.error.type == "timeout"
    assert result.content.startswith("before\n")
    assert after.content == "after\n[exit code: 0]"


async def test_a_command_cannot_open_the_memory_of_its_supervisor_or_the_spawner(
    tmp_path: Path,
) -> None:
    """The spawner and the supervisors are not dumpable: a command cannot rewrite the
    processes that run the session's later commands and report their exit status (it can
    still read its own memory)."""
    probe = (
        "spawner=$(cut -d' ' -f4 /proc/$PPID/stat); "
        "for pid in $PPID $spawner; do "
        "(exec 3</proc/$pid/mem) 2>/dev/null && echo opened:$pid; done; "
        "(exec 3</proc/self/mem) && echo own"
    )
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        first = await sh(policy, probe)
        again = await sh(policy, probe)  # a supervisor kept from the first command
    for result in (first, again):
        assert result.content == "own\n[exit code: 0]", result.content


async def test_commands_one_after_another_each_get_only_their_own(tmp_path: Path) -> None:
    """Supervisors are kept from one command to the next: each command still gets its own
    cwd, environment and three descriptors, and one that leaves a process behind keeps its
    supervisor to itself (the next command runs under another)."""
    directories = [tmp_path / name for name in "abcd"]
    for directory in directories:
        directory.mkdir()
    show = "pwd; echo $WHO; ls /proc/self/fd | tr '\\n' ' '"
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        results = []
        for index, directory in enumerate(directories):
            producer = ShellProducer(
                policy=policy, env={"WHO": str(index), "PATH": os.defpath}, **FAST
            )
            call = ToolCall(
                id="c", name="run_shell_command", args={"command": show, "cwd": str(directory)}
            )
            results.append(await producer.run(call, ProducerContext()))
        kept = await sh(policy, "sleep 30 & echo $PPID", kill_background=False)
        after = await sh(policy, "echo $PPID")
    assert [result.content for result in results] == [
        f"{directory}\n{index}\n0 1 2 3 \n[exit code: 0]"
        for index, directory in enumerate(directories)
    ]
    assert kept.content.split()[0] != after.content.split()[0]


# The spawner's other children than this command's supervisor: the one waiting for the next
# command (forked once this one's supervisor started the shell: wait for it), killed; then wait
# until it is gone, so the next command meets what it left.
KILL_WAITING_SUPERVISOR = r"""
spawner=$(awk '/^PPid/ {print $2}' /proc/$PPID/status)
while [ -z "$waiting" ]; do
  for stat in /proc/[0-9]*/stat; do
    read -r pid _ _ parent _ < "$stat" 2>/dev/null || continue
    [ "$parent" = "$spawner" ] && [ "$pid" != "$PPID" ] && waiting=$pid
  done
  [ -n "$waiting" ] || sleep 0.01
done
kill -9 "$waiting"
while [ -e /proc/$waiting ]; do sleep 0.01; done
echo killed
"""


async def test_a_supervisor_killed_before_it_reports_is_replaced_at_once(tmp_path: Path) -> None:
    """A supervisor killed before it said it took a command (here the one waiting for the
    next command; a command's own, by `kill -9 $PPID` as it starts, is the same case) is
    replaced at once: the next command runs, instead of failing after ``SPAWN_REPLY_S``."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        killer = await sh(policy, KILL_WAITING_SUPERVISOR)
        started = time.monotonic()
        after = await sh(policy, "echo after")
        took_s = time.monotonic() - started
    assert killer.content == "killed\n[exit code: 0]"
    assert after.content == "after\n[exit code: 0]"
    assert took_s < 5  # about 1 ms; the margin is for a loaded machine


async def test_killing_the_spawner_breaks_only_its_session_once(tmp_path: Path) -> None:
    """`kill -9 -1` kills the session's spawner and its commands: the one running ends at
    once with a clear error (not after its 30 s), and the next command gets a new spawner."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        results: dict[str, ToolResult] = {}
        started = time.monotonic()

        async def run(name: str, command: str) -> None:
            results[name] = await sh(policy, command)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "victim", "sleep 30")
            # The killer's supervisor is forked once the victim's took its request.
            tg.start_soon(run, "killer", "sleep 0.5; kill -9 -1; sleep 30")
        took_s = time.monotonic() - started
        after = await sh(policy, "echo after")
    assert took_s < 10
    for name in ("victim", "killer"):
        error = results[name].error
        assert error is not None, results[name]
        assert "spawner ended" in error.message
    assert after.content == "after\n[exit code: 0]"


async def test_a_protected_path_made_after_the_spawner_started_is_read_only(
    tmp_path: Path,
) -> None:
    """The spawner binds what exists when it starts; a protected path made later (or
    replaced) gets a new spawner that binds it, as a fresh bwrap per command did."""
    later = tmp_path / "later.json"
    with open_process_policy(workspace_roots=[tmp_path], protected_paths=[later]) as policy:
        before = await sh(policy, "echo first")
        later.write_text("{}\n")
        refused = await sh(policy, f"echo changed > {later}")
        later.unlink()
        later.write_text("[]\n")  # replaced: another inode, bound anew
        replaced = await sh(policy, f"cat {later}; echo changed > {later}")
    assert before.content == "first\n[exit code: 0]"
    assert "Read-only file system" in refused.content
    assert "[]\n" in replaced.content
    assert "Read-only file system" in replaced.content
    assert later.read_text() == "[]\n"


async def test_closing_the_session_ends_and_reaps_its_spawner(tmp_path: Path) -> None:
    """Once the policy (the scheduler's session) closes, no process of its sandbox is left:
    not bwrap, its init, the spawner, nor a waiting supervisor."""
    marker = f"TOOLBATCH_TEST_SESSION={uuid.uuid4().hex}"
    name, value = marker.split("=")
    with open_process_policy(workspace_roots=[tmp_path], shell_env_set={name: value}) as policy:
        assert (await sh(policy, "true")).content == "(no output)\n[exit code: 0]"
        assert len(_marked(marker)) >= 3  # bwrap, its init, the spawner (and a supervisor)
    assert _marked(marker) == []


async def test_a_spawner_that_cannot_start_falls_back_to_a_bwrap_per_command(
    tmp_path: Path,
) -> None:
    """A spawner that fails to start is reported once, naming why, and every command still
    runs, each under a bwrap of its own."""
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        assert BWRAP is not None
        broken = Spawner(
            wrapper=(BWRAP, "--no-such-option"),
            binds=list,
            watched=(),
            environment=dict(policy.environment or {}),
            seccomp=lambda: None,
        )
        fallback = dataclasses.replace(policy, spawner=broken)
        with capture_logs() as logs:
            first = await sh(fallback, "echo $PPID")
            second = await sh(fallback, "echo $PPID")
    warnings = [entry for entry in logs if entry["event"] == "sandbox.spawner_unavailable"]
    assert len(warnings) == 1
    assert "--no-such-option" in warnings[0]["reason"]
    assert "each command starts its own bwrap" in warnings[0]["consequence"]
    assert first.content == second.content == "1\n[exit code: 0]"  # bwrap's init


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codes=st.lists(st.integers(min_value=0, max_value=255), min_size=1, max_size=6))
def test_concurrent_commands_never_get_each_others_status_or_output(codes: list[int]) -> None:
    """However many commands run at once in one session, each gets its own output and exit
    code (each has a channel and pipes of its own)."""

    async def main() -> list[ToolResult | None]:
        results: list[ToolResult | None] = [None] * len(codes)
        with open_process_policy(workspace_roots=[Path.cwd()]) as policy:

            async def run(index: int) -> None:
                command = f"echo out-{index}; sleep 0.0{index}; exit {codes[index]}"
                results[index] = await sh(policy, command)

            async with anyio.create_task_group() as tg:
                for index in range(len(codes)):
                    tg.start_soon(run, index)
        return results

    for index, result in enumerate(anyio.run(main)):
        assert result is not None
        assert isinstance(result.content, str)
        assert result.returncode == codes[index]
        assert without_exit_line(result.content) == f"out-{index}\n"


async def test_start_failures_are_told_and_the_session_goes_on(tmp_path: Path) -> None:
    """A shell that is missing, a command too long for exec, and a long command sent through
    a memfd: each gets its own answer, and the session's spawner keeps serving."""
    long_word = "x" * 100_000  # over the inline request size: travels in a memfd
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        missing = await sh(policy, "true", shell="no-such-shell")
        too_long = await sh(policy, "echo " + "y" * 200_000)
        long = await sh(policy, f"echo {long_word} | wc -c")
        after = await sh(policy, "echo after")
    assert missing.error is not None
    assert missing.error.type == "execution_failed"
    assert "could not start 'no-such-shell'" in missing.error.message
    assert too_long.error is not None
    assert too_long.error.type == "invalid_args"
    assert "argument list too long" in too_long.error.message
    assert long.content == "100001\n[exit code: 0]"
    assert after.content == "after\n[exit code: 0]"
