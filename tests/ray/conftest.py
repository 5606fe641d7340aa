"""One local Ray instance for the tests of toolbatch.ray, and proof that none of it outlives
them.

Ray starts once for the whole directory (a start costs about 10 s here), with the CPUs this
machine has, no dashboard, and the state directory of the test session, so hosts never
write into the real per-user one. At the end every process of the instance (GCS, raylet,
workers) must be gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

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


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent_pid(pid: int) -> int:
    """The parent of ``pid``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def pid_pipe(directory: Path) -> Path:
    """A named pipe a remote command writes a pid into (``echo $! > pipe``)."""
    path = directory / "pid.fifo"
    os.mkfifo(path)
    return path


async def read_pid(pipe: Path) -> int:
    """The pid written into ``pipe`` (waits for the writer: no polling)."""
    return int(await anyio.to_thread.run_sync(pipe.read_text))


def wait_gone(pids: list[int], *, timeout_s: float = GONE_WAIT_S) -> list[int]:
    """The pids still alive after waiting up to ``timeout_s`` for them to end."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if pid_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if pid_alive(pid)]
    return alive


@pytest.fixture(scope="package", autouse=True)
def ray_instance(_session_state_dir: Path) -> Iterator[str]:
    """A local Ray instance for this directory; its session directory."""
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
        assert left == [], f"Ray processes outlived the tests: {left}"
