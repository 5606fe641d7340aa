"""Hostile conditions for the shell (issue 14): aborts, a full disk, a host killed with -9."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import pytest

from toolbatch import ArtifactStore, ToolCall, ToolResult, Turn
from toolbatch.producers import ProducerContext, ShellProducer
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

FAST: dict[str, Any] = {"kill_grace_s": 0.3, "drain_s": 0.3}


def _children(pid: int) -> list[int]:
    """Pids of the direct children of ``pid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == pid:
                found.append(int(name))
    return found


def _live_group_members(pgid: int) -> list[int]:
    """Pids of the non-zombie processes in group ``pgid`` (this VM's init leaves zombies)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


async def _read_fifo(fifo: Path, timeout_s: float = 30) -> str:
    """The first line a command writes to ``fifo`` (blocks until it does: an event)."""
    with anyio.fail_after(timeout_s):
        return await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)


def _seq_bytes(last: int) -> bytes:
    return "".join(f"{n}\n" for n in range(1, last + 1)).encode()


# -- an abort keeps the output (item 13) ----------------------------------------------------


async def _run_and_abort(scheduler: ToolScheduler, command: str, fifo: Path) -> tuple[Turn, int]:
    abort = anyio.Event()
    turns: list[Turn] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            call = ToolCall(id="long", name="run_shell_command", args={"command": command})
            turns.append(await scheduler.run_batch([call], abort=abort))

        tg.start_soon(run)
        pgid = int(await _read_fifo(fifo))
        abort.set()
    return turns[0], pgid


async def test_an_aborted_call_keeps_its_partial_output_and_artifact(tmp_path: Path) -> None:
    """run_batch(abort=...) answers the running command with what it printed and its file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = SchedulerConfig(artifacts_dir=tmp_path / "artifacts", workspace_roots=[tmp_path])
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        turn, pgid = await _run_and_abort(
            scheduler, f'seq 1 100000; echo "$$" > {fifo}; sleep 60', fifo
        )
    (response,) = turn.responses
    assert response.status == "cancelled"
    assert response.error_type == "cancelled"
    assert response.persisted_output_files is not None
    (path,) = response.persisted_output_files
    assert path.read_bytes() == _seq_bytes(100_000)
    text = str(response.parts)
    assert f"Full output: {path}\\n" in text  # str(parts) escapes the newline
    assert "99999\\n100000\\n[cancelled; its processes were stopped with SIGTERM]" in text
    assert _live_group_members(pgid) == []


async def test_an_aborted_call_with_little_output_keeps_it_inline(tmp_path: Path) -> None:
    """Under the trigger the partial output itself is the answer, status cancelled."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = SchedulerConfig(artifacts_dir=tmp_path / "artifacts", workspace_roots=[tmp_path])
    async with ToolScheduler(Registry([ShellProducer(**FAST)]), config) as scheduler:
        turn, _ = await _run_and_abort(
            scheduler, f'echo so far; echo "$$" > {fifo}; sleep 60', fifo
        )
    (response,) = turn.responses
    assert response.status == "cancelled"
    assert response.persisted_output_files is None  # whole output: nothing to persist
    assert "so far\\n[cancelled; its processes were stopped with SIGTERM]" in str(response.parts)


async def test_the_callers_cancellation_stores_the_partial_result(tmp_path: Path) -> None:
    """Cancelling the caller's scope stops the group and leaves context.partial_result."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    context = ProducerContext(store=ArtifactStore(tmp_path / "artifacts"))
    returned: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            command = f'echo before; echo "$$" > {fifo}; sleep 60'
            args = {"command": command}
            producer = ShellProducer(**FAST)
            returned.append(await producer.run(ToolCall(id="c", name="x", args=args), context))

        tg.start_soon(call)
        pgid = int(await _read_fifo(fifo))
        tg.cancel_scope.cancel()
    assert returned == []  # the cancellation propagated
    partial = context.partial_result
    assert partial is not None
    assert partial.error is not None
    assert partial.error.type == "cancelled"
    assert partial.content == "before\n[cancelled; its processes were stopped with SIGTERM]"
    assert _live_group_members(pgid) == []


# -- a full disk mid-stream (item 9) --------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A real tmpfs of ``request.param`` (e.g. "20m"): ENOSPC is the kernel's, not a mock."""
    mount_point = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; this run is not root")
    done = subprocess.run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={request.param},mode=0700",
            "tmpfs",
            str(mount_point),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.parametrize(
    ("tmpfs", "last"),
    [
        pytest.param("1m", 4_000_000, id="30MB-on-1MiB-first-flush-fails"),
        pytest.param("20m", 6_000_000, id="46MB-on-20MiB-fills-after-a-flush"),
    ],
    indirect=["tmpfs"],
)
async def test_a_primary_disk_filling_mid_stream_falls_back(
    tmpfs: Path, tmp_path: Path, last: int
) -> None:
    """ENOSPC mid-stream moves the artifact to the fallback directory; nothing is lost."""
    store = ArtifactStore(tmpfs / "primary", fallback_dir=tmp_path / "fallback")
    context = ProducerContext(store=store)
    call = ToolCall(id="big", name="run_shell_command", args={"command": f"seq 1 {last}"})
    result = await ShellProducer().run(call, context)
    (path,) = store.written
    assert path.parent == tmp_path / "fallback"
    assert result.persisted_output_files == (path,)
    expected = hashlib.sha256(_seq_bytes(last)).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == expected
    assert f"Full output: {path}\n" in result.content
    assert os.listdir(tmpfs / "primary") == []  # the torn temp file is gone


# -- the host dies (item 14) ----------------------------------------------------------------

_HOST: Final = """
import sys
import anyio
import toolbatch.sandbox._process
import toolbatch.sandbox._spawner
from toolbatch import ToolCall
from toolbatch.producers import ShellProducer
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

fifo, registered, artifacts, sandbox, seconds = sys.argv[1:]
register = toolbatch.sandbox._process.reap_with_host

def register_and_report(pgid):
    register(pgid)
    with open(registered, "w") as report:
        report.write(f"{pgid}\\n")

toolbatch.sandbox._process.reap_with_host = register_and_report
toolbatch.sandbox._spawner.reap_with_host = register_and_report  # the session's bwrap

async def main():
    config = SchedulerConfig(artifacts_dir=artifacts, sandbox=sandbox)
    command = f'sleep {seconds} & echo "$$ $!" > {fifo}; wait'
    call = ToolCall(id="c", name="run_shell_command", args={"command": command})
    async with ToolScheduler(Registry([ShellProducer()]), config) as scheduler:
        await scheduler.run_batch([call])

anyio.run(main)
"""
"""A host that runs ``sleep <seconds>`` under bash and reports the group's registration with
the reaper (one FIFO) and ``<pgid> <sleep pid>`` from the command (another), then waits.
Under bubblewrap those two are pids of the command's own namespace, and the registered group
is the outer ``bwrap``'s."""


def _sleepers(seconds: str) -> list[int]:
    """Host pids of live ``sleep <seconds>`` processes, whatever namespace they are in."""
    wanted = f"sleep\0{seconds}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("sandbox", "children_too"),
    [
        pytest.param("workspace-write", False, id="workspace-write"),
        pytest.param("off", False, id="off"),
        pytest.param("off", True, id="supervisor-kills-the-hosts-children-too"),
    ],
)
def test_kill_9_of_the_host_leaves_no_command_running(
    tmp_path: Path, sandbox: str, children_too: bool
) -> None:
    """A host killed with SIGKILL mid-command: bash and its ``sleep 1000`` die with it.

    The kill comes once the group is registered (reported by the host): a host killed in
    the microseconds between ``Popen`` returning and the registration is the documented
    window this does not cover. ``children_too`` kills the host's direct children with it,
    as a supervisor does (Ray's raylet kills a dead worker's children): the reaper is not
    among them, so the command's background ``sleep`` still dies.
    """
    fifo, registered = tmp_path / "fifo", tmp_path / "registered"
    os.mkfifo(fifo)
    os.mkfifo(registered)
    seconds = f"1000.{uuid.uuid4().int % 10**6}"
    host = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _HOST,
            str(fifo),
            str(registered),
            str(tmp_path / "art"),
            sandbox,
            seconds,
        ],
        cwd=tmp_path,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Both block until written: the order the two writers reach them does not matter.
        with ThreadPoolExecutor(2) as pool:
            started = pool.submit(fifo.read_text)
            registration = pool.submit(registered.read_text)
            pgid, sleeper = map(int, started.result().split())
            registered_pgid = int(registration.result())
        if sandbox == "off":
            assert registered_pgid == pgid
            assert sleeper in _live_group_members(pgid)
        else:  # namespaced: the host registered the session's (outer) bwrap
            pgid = registered_pgid
            # `$!` is known once bash forked, the `sleep` cmdline once the child exec'd.
            deadline = time.monotonic() + 10
            while not _sleepers(seconds) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(_sleepers(seconds)) == 1
        children = _children(host.pid) if children_too else []
        host.send_signal(signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        host.wait()
        # The reaper acts on its own schedule once the host's pipe closes: poll /proc.
        deadline = time.monotonic() + 10
        while (_live_group_members(pgid) or _sleepers(seconds)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _live_group_members(pgid) == []
        assert _sleepers(seconds) == []
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
