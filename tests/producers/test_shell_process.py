"""Process groups: the pipe, stopping a group (TERM, grace, KILL), and zombies not counted."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.processes import alive
from toolbatch.sandbox._process import (
    PIPE_BUFFER_BYTES,
    GroupStop,
    group_alive,
    group_members,
    open_group_process,
    open_pipe,
    signal_group,
    stop_group,
)


async def _spawn(command: str) -> anyio.abc.Process:
    return await open_group_process(
        ["bash", "-c", command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def _spawn_ready(command: str, tmp_path: Path) -> anyio.abc.Process:
    """Start ``command`` and return once it ran ``{ready}`` (a FIFO write: an event, no sleep)."""
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    process = await _spawn(command.format(ready=f"echo ready > {fifo}"))
    with anyio.fail_after(10):
        assert await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True) == "ready\n"
    return process


def test_open_pipe_is_non_blocking_and_large() -> None:
    """The read end never blocks the event loop and the pipe holds up to 1 MiB if allowed."""
    read_fd, write_fd = open_pipe()
    try:
        with pytest.raises(BlockingIOError):
            os.read(read_fd, 1)
        allowed = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        size = fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ)
        assert size >= min(PIPE_BUFFER_BYTES, allowed) or size == 65536
        if os.geteuid() == 0:
            assert size == PIPE_BUFFER_BYTES
        assert not os.get_inheritable(read_fd)
        assert not os.get_inheritable(write_fd)
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_a_cooperative_group_stops_on_term(tmp_path: Path) -> None:
    """Members that honour SIGTERM are gone well before the grace ends; no SIGKILL."""
    process = await _spawn_ready("sleep 60 & sleep 60 & {ready}; wait", tmp_path)
    assert len(group_members(process.pid)) >= 3
    started = time.monotonic()
    stop = await stop_group(process, grace_s=5)
    assert time.monotonic() - started < 2
    assert stop == GroupStop(terminated=True, killed=False)
    assert group_members(process.pid) == []
    assert process.returncode is not None
    await process.aclose()  # lets the host reaper forget the group


async def test_a_member_ignoring_term_gets_kill_after_the_grace(tmp_path: Path) -> None:
    """A member with SIGTERM ignored survives the grace, then SIGKILL ends it."""
    process = await _spawn_ready("(trap '' TERM; {ready}; exec sleep 60) & wait", tmp_path)
    started = time.monotonic()
    stop = await stop_group(process, grace_s=0.3)
    assert time.monotonic() - started >= 0.3
    assert stop == GroupStop(terminated=True, killed=True)
    assert group_members(process.pid) == []
    await process.aclose()


async def test_a_stopped_member_still_acts_on_term(tmp_path: Path) -> None:
    """SIGCONT follows SIGTERM, so a SIGSTOPped member does not need the SIGKILL."""
    process = await _spawn_ready("sleep 60 & kill -STOP $! && {ready}; wait", tmp_path)
    stop = await stop_group(process, grace_s=5)
    assert stop == GroupStop(terminated=True, killed=False)
    assert group_members(process.pid) == []
    await process.aclose()


async def test_stopping_a_finished_group_only_reaps() -> None:
    """On an empty group stop_group sends nothing and just collects the exit status."""
    process = await _spawn("exit 7")
    await process.wait()
    assert await stop_group(process, grace_s=1) == GroupStop(terminated=False, killed=False)
    assert process.returncode == 7
    await process.aclose()


def test_zombies_do_not_count_as_alive() -> None:
    """An exited, unreaped member is not alive; the group is gone once it is reaped."""
    child = subprocess.Popen(["true"], start_new_session=True)
    try:
        # Wait for the exit but leave the child unreaped: a zombie, without polling.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert signal_group(child.pid, 0)  # the zombie still exists...
        assert group_members(child.pid) == []  # ...but is not a live member
        assert not anyio.run(group_alive, child.pid)
    finally:
        child.wait()
    assert not signal_group(child.pid, 0)


def test_a_clean_exit_stops_the_reaper_without_a_warning(tmp_path: Path) -> None:
    """A host that ran a command and exits normally leaves no reaper and warns about none."""
    script = tmp_path / "host.py"
    script.write_text(
        "import anyio, toolbatch\n"
        "toolbatch.configure_logging('error')\n"
        "from toolbatch.sandbox import _reaper\n"
        "async def main():\n"
        "    config = toolbatch.SchedulerConfig(artifacts_dir='arts', sandbox='off')\n"
        "    async with toolbatch.ToolScheduler(toolbatch.default_registry(), config) as s:\n"
        "        args = {'command': 'true'}\n"
        "        call = toolbatch.ToolCall(id='c', name='run_shell_command', args=args)\n"
        "        await s.run_batch([call])\n"
        "    print(_reaper._reaper.pid)\n"
        "anyio.run(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-X", "dev", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "still running" not in done.stderr
    reaper = int(done.stdout.strip().splitlines()[-1])
    # The reaper is not the host's child (so no supervisor of the host can kill it first):
    # once it has exited, init reaps it on its own schedule.
    deadline = time.monotonic() + 10
    while alive(reaper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(reaper)
