"""Process groups that die with their host, even when the host is killed with SIGKILL.

``PR_SET_PDEATHSIG`` is not enough: it reaches only the direct child (``bash``, not the
``sleep`` it runs), and it fires when the *thread* that forked exits, not the process. So a
tiny reaper process is started once per host, on first use: it reads the registered process
groups (``+<pgid>`` and ``-<pgid>`` lines) from a pipe whose only write end the host holds.
When the host exits, however it exits, the kernel closes that write end; the reaper reads EOF,
sends SIGKILL to every group still registered, and exits.

The reaper runs in a session of its own (a Ctrl-C on the host's terminal does not reach it)
with an empty environment, in ``/``. Its pipe is close-on-exec, and a child forked from the
host without ``exec`` closes its copy (``os.register_at_fork``), so no other process keeps
the reaper waiting. The reaper is started (from the event loop's thread, never a sandbox's)
before a group is spawned, and the group is registered by the spawning thread as soon as
``Popen`` returns: only a host killed within those microseconds leaves that one group behind.
It is unregistered when the caller is done with it. The reaper counts registrations per
group id, so a late unregistration of a group whose leader's pid was reused since cannot
cancel the registration of the new group. A reaper that died is started again before the
next spawn. Where no Python interpreter
can be run, groups are not protected; this is logged once. When the host exits normally it
closes the pipe itself and waits (briefly) for the reaper, so no reaper outlives a clean exit
and the interpreter does not warn about a child still running.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Final

import structlog

__all__ = ["ensure_reaper", "forget_group", "reap_with_host"]

log = structlog.get_logger("toolbatch.producers.process")

REAPER_EXIT_WAIT_S: Final = 2.0
"""How long a host exiting normally waits for its reaper to finish."""
REAPER_SOURCE: Final = """
import os, signal
if os.fork():
    os._exit(0)
os.write(1, b"%d\\n" % os.getpid())
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
groups = {}
pending = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    *lines, pending = (pending + data).split(b"\\n")
    for line in lines:
        pgid = int(line[1:])
        count = groups.get(pgid, 0) + (1 if line[:1] == b"+" else -1)
        if count > 0:
            groups[pgid] = count
        else:
            groups.pop(pgid, None)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""
"""The reaper's program (``python -I -S -c``): a few milliseconds to start, once per host.

It forks once and the first process exits, so the reaper is not the host's child: a
supervisor that kills a dead host's children (Ray's raylet kills a dead worker's) cannot
kill it before it has read EOF. It writes its pid on its stdout, a pipe the host reads; the
pipe reaches EOF when the reaper exits, which is how the host knows it is alive.
"""
REAPER_START_S: Final = 10.0
"""How long the host waits for a starting reaper to report its pid."""


@dataclass(slots=True, eq=False)
class _Reaper:
    pid: int
    write_fd: int
    alive_fd: int
    """The read end of the reaper's stdout: EOF once the reaper has exited."""

    def exited(self, timeout_s: float = 0.0) -> bool:
        """Whether the reaper has exited (waiting up to ``timeout_s`` for it)."""
        readable, _, _ = select.select([self.alive_fd], [], [], timeout_s)
        if not readable:
            return False
        try:
            return os.read(self.alive_fd, 4096) == b""
        except BlockingIOError:
            return False

    def close(self) -> None:
        for fd in (self.write_fd, self.alive_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


_lock = threading.Lock()
_reaper: _Reaper | None = None
_unavailable = False


def _start() -> _Reaper | None:
    global _unavailable
    if _unavailable:
        return None
    read_fd, write_fd = os.pipe()  # both ends close-on-exec
    alive_fd, alive_write_fd = os.pipe()
    try:
        launcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", REAPER_SOURCE],
            stdin=read_fd,
            stdout=alive_write_fd,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,
        )
        launcher.wait(timeout=REAPER_START_S)  # it forks the reaper and exits at once
        pid = _read_pid(alive_fd)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        for fd in (write_fd, alive_fd):
            os.close(fd)
        _unavailable = True
        log.warning(
            "process.reaper_unavailable",
            error=str(exc) or type(exc).__name__,
            consequence="shell commands may outlive a host that is killed",
        )
        return None
    finally:
        os.close(read_fd)
        os.close(alive_write_fd)
    os.set_blocking(write_fd, False)
    os.set_blocking(alive_fd, False)
    return _Reaper(pid, write_fd, alive_fd)


def _read_pid(fd: int) -> int:
    """The pid line the reaper writes first."""
    data = b""
    while not data.endswith(b"\n"):
        readable, _, _ = select.select([fd], [], [], REAPER_START_S)
        chunk = os.read(fd, 64) if readable else b""
        if not chunk:
            raise OSError("the reaper did not start")
        data += chunk
    return int(data)


def ensure_reaper() -> None:
    """Start the reaper if it is not running (call it from an unconfined thread)."""
    global _reaper
    with _lock:
        if _reaper is not None and _reaper.exited():
            _reaper.close()  # it died: its groups are unprotected, start anew
            _reaper = None
        if _reaper is None:
            _reaper = _start()


def _send(line: bytes) -> None:
    global _reaper
    with _lock:
        if _reaper is None:
            return
        try:
            os.write(_reaper.write_fd, line)
        except BrokenPipeError:
            _reaper.close()
            _reaper = None
            log.warning("process.reaper_died", line=line.decode().strip())
        except BlockingIOError:
            log.warning("process.reaper_busy", line=line.decode().strip())


def reap_with_host(pgid: int) -> None:
    """Register process group ``pgid``: it gets SIGKILL if this process dies first.

    Thread-safe; a no-op without a running reaper (:func:`ensure_reaper` starts one).
    """
    _send(b"+%d\n" % pgid)


def forget_group(pgid: int) -> None:
    """Unregister process group ``pgid`` (call it once the group is stopped or let go)."""
    _send(b"-%d\n" % pgid)


def _stop_at_exit() -> None:
    """On a normal exit: close the pipe (the reaper kills what is still registered) and wait."""
    global _reaper
    with _lock:
        reaper, _reaper = _reaper, None
    if reaper is None:
        return
    with contextlib.suppress(OSError):
        os.close(reaper.write_fd)
    if not reaper.exited(REAPER_EXIT_WAIT_S):
        with contextlib.suppress(OSError):
            os.kill(reaper.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(reaper.alive_fd)


def _forget_in_child() -> None:
    """After a bare ``fork``: the child neither keeps the host's reaper waiting nor uses it."""
    global _lock, _reaper
    _lock = threading.Lock()
    if _reaper is not None:
        _reaper.close()
        _reaper = None


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_stop_at_exit)
