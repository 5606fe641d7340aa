"""One local Ray instance for the tests of toolbatch.ray, and proof that none of it outlives
them.

Ray starts once for the whole directory (a start costs about 10 s here), with the CPUs this
machine has, no dashboard, and the state directory of the test session, so hosts never
write into the real per-user one. At the end every process of the instance (GCS, raylet,
workers) must be gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from tests.processes import alive as pid_alive

ray = pytest.importorskip("ray")

GONE_WAIT_S = 30.0


def instance_pids(session_dir: str) -> list[int]:
    """Processes whose command line names the instance's session directory."""
    found = []
    marker = session_dir.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry))
    return found


def parent_pid(pid: int) -> int:
    """The parent of ``pid``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(parent_pid(int(entry)), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return [p for p in found if pid_alive(p)]


def pid_pipe(directory: Path) -> Path:
    """A named pipe a remote command writes a pid into (``echo $! > pipe``)."""
    path = directory / "pid.fifo"
    os.mkfifo(path)
    return path


def background_sleep(pipe: Path, *, delay_s: float = 0) -> str:
    """A command fragment: ``sleep`` for 300-odd seconds in the background, then write which
    into ``pipe``. Its own ``$!`` would not do: under the sandbox it is a pid of the
    command's PID namespace, not the host's; :func:`read_pid` finds the host's."""
    seconds = f"300.{uuid.uuid4().int % 10**6:06d}"
    pause = f"sleep {delay_s:g}; " if delay_s else ""
    return f"sleep {seconds} & {pause}echo {seconds} > {pipe}"


def _sleeping(seconds: str) -> list[int]:
    wanted = f"sleep\0{seconds}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
    return found


async def read_pid(pipe: Path) -> int:
    """The host pid of the :func:`sleeper` that wrote into ``pipe`` (waits for the writer)."""
    seconds = (await anyio.to_thread.run_sync(pipe.read_text)).strip()
    # The background job may not have exec'd `sleep` yet when the echo is read.
    with anyio.fail_after(10):
        while not (found := _sleeping(seconds)):  # noqa: ASYNC110  (another process: no event)
            await anyio.sleep(0.01)
    (pid,) = found
    return pid


def wait_gone(pids: list[int], *, timeout_s: float = GONE_WAIT_S) -> list[int]:
    """The pids still alive after waiting up to ``timeout_s`` for them to end."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if pid_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if pid_alive(pid)]
    return alive


@pytest.fixture(scope="package", autouse=True)
def ray_instance(
    _session_state_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A local Ray instance for this directory; its session directory.

    Its processes inherit ``TMPDIR``: the workspaces of sessions whose host is killed on
    purpose (never closed, so never removed) land in a directory removed at the end, not in
    ``/tmp``. Ray's own directory stays at ``/tmp/ray`` (``RAY_TMPDIR``): its socket paths
    must fit in 107 bytes.
    """
    workspaces = tmp_path_factory.mktemp("ray-tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_TMPDIR", os.environ.get("RAY_TMPDIR", "/tmp"))
        patch.setenv("TMPDIR", str(workspaces))
        ray.init(
            num_cpus=os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    session_dir = ray._private.worker._global_node.get_session_dir_path()
    assert instance_pids(session_dir), "cannot find the Ray instance's processes"
    try:
        yield session_dir
    finally:
        ray.shutdown()
        left = wait_gone(instance_pids(session_dir))
        shutil.rmtree(workspaces, ignore_errors=True)
        assert left == [], f"Ray processes outlived the tests: {left}"
