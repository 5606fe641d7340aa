"""Child processes in a process group of their own: spawn, capture, stop, leave nothing behind.

Shared by every producer that runs a command (shell, MCP stdio servers, command hooks).

A child is started with ``start_new_session=True``, so its pid is also its process-group id
and everything it forks stays in that group unless it calls ``setsid``/``setpgid`` itself.
``anyio``'s own ``Process.kill()``/``aclose()`` signal only the direct child and orphan the
rest, so stopping always goes through :func:`stop_group`: SIGTERM (plus SIGCONT, so stopped
members act on it) to the whole group, a grace period, then SIGKILL to whatever is left, and
the leader is reaped.

:func:`open_group_process` (the shell's) starts the child with ``subprocess.Popen`` and waits
for it on a pidfd, so it can be started from another thread (a sandbox's confined spawner
thread, see ``toolbatch.sandbox._confinement``) and needs no child-watcher thread; its group
is registered with the host reaper (``toolbatch.sandbox._reaper``), so it dies with the host
even on ``kill -9``.

A command started under bubblewrap (``namespaced=True``) is a tree instead: the outer
``bwrap`` (the group leader the host started), its init (pid 1 of the command's PID
namespace) and the command beneath it, in a session of its own. :func:`stop_group` then sends
SIGTERM and SIGCONT to every process beneath the init (found by parent pid in /proc, so a
``setsid`` escapee is found too), waits the grace, and SIGKILLs the outer ``bwrap`` and the
init, which takes the whole namespace with it. Killing the outer ``bwrap`` alone (the reaper
does) has the same effect through ``--die-with-parent``.

Limits, by design: outside a namespace, a descendant that leaves the group (``setsid``,
``setpgid``) cannot be found this way; catching those needs a cgroup (``cgroup.kill``) or
``prctl(PR_SET_CHILD_SUBREAPER)`` plus reaping, both process-wide decisions a library does
not make for its host. Orphaned members that died are re-parented to PID 1; if PID 1 does
not reap (some container inits do not), they stay as zombies, which hold a pid and nothing
else. Liveness checks here ignore zombies for that reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import anyio
import anyio.abc
import anyio.to_thread
import structlog

from toolbatch.sandbox._reaper import ensure_reaper, forget_group, reap_with_host

__all__ = [
    "PIPE_BUFFER_BYTES",
    "GroupProcess",
    "GroupStop",
    "SpawnThread",
    "TreeProcess",
    "children_by_parent",
    "command_alive",
    "group_alive",
    "group_members",
    "open_group_process",
    "open_pipe",
    "sandboxed_members",
    "signal_each",
    "signal_group",
    "stop_group",
    "terminate_and_wait",
    "wait_group_gone",
]

log = structlog.get_logger("toolbatch.producers.process")

PIPE_BUFFER_BYTES: Final = 1 * 2**20
"""Requested pipe capacity (F_SETPIPE_SZ): fewer wake-ups and larger reads than the 64 KiB
default; the kernel's ``fs.pipe-max-size`` (1 MiB by default) bounds it for non-root."""
GROUP_POLL_MIN_S: Final = 0.002
GROUP_POLL_MAX_S: Final = 0.05
"""Polling bounds while waiting for a group to empty: the kernel offers no event for it."""
KILL_SETTLE_S: Final = 1.0
"""How long SIGKILLed members get to leave the group before :func:`stop_group` returns."""

_PROC: Final = "/proc"


def open_pipe(*, size_bytes: int = PIPE_BUFFER_BYTES) -> tuple[int, int]:
    """A pipe ``(read_fd, write_fd)`` for a child's output.

    The read end is non-blocking (read it with ``os.read`` and ``anyio.wait_readable``); the
    capacity is raised to ``size_bytes`` when the kernel allows it (best effort). Both ends
    are non-inheritable: pass the write end as the child's ``stdout`` and close it in the
    parent once the child has started.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        # EPERM above fs.pipe-max-size or past the per-user pipe quota: keep the default.
        with contextlib.suppress(OSError):
            fcntl.fcntl(write_fd, set_size, size_bytes)
    return read_fd, write_fd


class SpawnThread(Protocol):
    """Runs the function that starts a process in a thread of its own choosing."""

    async def run(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """Call ``start`` there and return what it returned (or raise what it raised)."""
        ...


class _PipedElsewhere(anyio.abc.Process):
    """A process whose pipes the caller made and reads itself (``toolbatch.producers``'
    capture), so the process object holds none."""

    @property
    def stdin(self) -> None:
        return None

    @property
    def stdout(self) -> None:
        return None

    @property
    def stderr(self) -> None:
        return None


class TreeProcess(_PipedElsewhere):
    """A process that knows how to stop itself and everything it started (a sandbox's
    spawned command): :func:`stop_group` defers to its :meth:`stop`."""

    async def stop(self, *, grace_s: float) -> GroupStop:
        """Stop every process of the command (SIGTERM, the grace, SIGKILL) and wait."""
        raise NotImplementedError

    async def alive(self) -> bool:
        """Whether a process of the command is left."""
        raise NotImplementedError


class GroupProcess(_PipedElsewhere):
    """A process started by :func:`open_group_process`: a ``Popen`` awaited through a pidfd.

    Its group stays registered with the host reaper until :meth:`aclose`. Without pidfds (not
    Linux, or older than 5.3) :meth:`wait` blocks a worker thread instead.
    """

    def __init__(self, popen: subprocess.Popen[bytes], *, namespaced: bool = False) -> None:
        self._popen = popen
        self.namespaced = namespaced
        """Whether ``popen`` is an outer ``bwrap`` and the command runs beneath its init."""
        self._pidfd: int | None = None
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is not None:
            with contextlib.suppress(OSError):
                self._pidfd = pidfd_open(popen.pid)
        self._waiting = anyio.Lock(fast_acquire=True)  # no event-loop turn when free
        self._registered = True

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        async with self._waiting:
            while (code := self._popen.poll()) is None:
                if self._pidfd is not None:
                    await anyio.wait_readable(self._pidfd)
                else:
                    await anyio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
        self._close_pidfd()
        return code

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    async def aclose(self) -> None:
        """Wait for the leader, then let the group go (no longer killed with the host).

        Stop the group first (:func:`stop_group`) unless it may outlive the call.
        """
        try:
            await self.wait()
        finally:
            self._close_pidfd()
            if self._registered:
                self._registered = False
                forget_group(self._popen.pid)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


async def open_group_process(
    argv: Sequence[str],
    *,
    stdout: int,
    stderr: int,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    spawn_thread: SpawnThread | None = None,
    namespaced: bool = False,
    pass_fds: Sequence[int] = (),
) -> GroupProcess:
    """Start ``argv`` as the leader of a new session and process group, stdin from /dev/null.

    ``stdout``/``stderr`` are file descriptors (or ``subprocess.STDOUT`` for ``stderr``).
    ``spawn_thread`` starts it from another thread (whose restrictions it inherits); by
    default it starts from this one. ``pass_fds`` stay open in the child. ``namespaced``:
    ``argv`` is a ``bwrap`` command line (see the module docstring for how it is stopped).
    Stop it with :func:`stop_group`, never with ``Process.kill()`` alone, then ``aclose()``
    it.

    Raises:
        OSError: the program could not be started (not found, not executable, bad ``cwd``).
        ValueError: an argument holds a NUL byte.
    """

    def start() -> subprocess.Popen[bytes]:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
        reap_with_host(popen.pid)  # at once, in the spawning thread: the narrowest window
        return popen

    ensure_reaper()
    popen = start() if spawn_thread is None else await spawn_thread.run(start)
    return GroupProcess(popen, namespaced=namespaced)


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to process group ``pgid``; ``False`` when the group no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Members exist but we may not signal them (a setuid program): it is still alive.
        log.warning("process.signal_denied", pgid=pgid, signal=signal.Signals(signum).name)
    return True


def _live_processes() -> Iterator[tuple[int, int, int]] | None:
    """``(pid, ppid, pgrp)`` of every live (not zombie) process, read from /proc; ``None``
    where /proc cannot be listed."""
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return None
    return _stat_fields(entries)


def _stat_fields(entries: list[str]) -> Iterator[tuple[int, int, int]]:
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"{_PROC}/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split(maxsplit=3)
        if len(fields) >= 3 and fields[0] not in (b"Z", b"X"):
            yield int(name), int(fields[1]), int(fields[2])


def group_members(pgid: int) -> list[int]:
    """The pids of the live (not zombie) processes in group ``pgid``, read from /proc.

    Returns ``[]`` for an empty group. Where /proc is unavailable it falls back to
    ``killpg(pgid, 0)``, which cannot tell zombies apart, and reports ``[pgid]`` while the
    group exists.
    """
    processes = _live_processes()
    if processes is None:
        return [pgid] if signal_group(pgid, 0) else []
    return [pid for pid, _, group in processes if group == pgid]


def children_by_parent() -> dict[int, list[int]]:
    """Every live (not zombie) process by parent pid, from /proc."""
    children: dict[int, list[int]] = {}
    for pid, parent, _ in _live_processes() or ():
        children.setdefault(parent, []).append(pid)
    return children


def sandboxed_members(leader: int) -> tuple[list[int], list[int]]:
    """``(inits, members)`` of the ``bwrap`` started as ``leader``: its children (the init of
    the command's PID namespace) and every live process beneath them."""
    children = children_by_parent()
    inits = children.get(leader, [])
    members: list[int] = []
    pending = [pid for init in inits for pid in children.get(init, [])]
    while pending:
        pid = pending.pop()
        members.append(pid)
        pending.extend(children.get(pid, []))
    return inits, members


def signal_each(pids: Sequence[int], signum: int) -> None:
    """Send ``signum`` to each of ``pids``; one already gone (or not ours) is skipped."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


async def terminate_and_wait(members: Callable[[], Sequence[int]], *, grace_s: float) -> bool:
    """SIGTERM and SIGCONT to the processes ``members()`` lists (read in a thread: a /proc
    scan), then wait up to ``grace_s`` for none to be left, polling with a backoff from 2 ms
    to 50 ms. Whether there was any to signal."""
    found = await anyio.to_thread.run_sync(members)
    if not found:
        return False
    signal_each(found, signal.SIGTERM)
    signal_each(found, signal.SIGCONT)
    delay = GROUP_POLL_MIN_S
    with anyio.move_on_after(grace_s):
        while await anyio.to_thread.run_sync(members):
            await anyio.sleep(delay)
            delay = min(delay * 2, GROUP_POLL_MAX_S)
    return True


async def _stop_namespace(process: GroupProcess, *, grace_s: float) -> GroupStop:
    """:func:`stop_group` for a command under ``bwrap`` (see the module docstring)."""
    leader = process.pid
    terminated = await terminate_and_wait(lambda: sandboxed_members(leader)[1], grace_s=grace_s)
    killed = False
    if await group_alive(leader):
        inits, members = await anyio.to_thread.run_sync(sandboxed_members, leader)
        # The init's death kills its namespace; the outer bwrap would take it too.
        signal_each(inits, signal.SIGKILL)
        killed = signal_group(leader, signal.SIGKILL) and bool(members)
    await process.wait()
    if terminated or killed:
        log.debug("process.namespace_stopped", pid=leader, terminated=terminated, killed=killed)
    return GroupStop(terminated=terminated, killed=killed)


async def group_alive(pgid: int) -> bool:
    """Whether any live process is left in group ``pgid`` (the /proc scan runs in a thread)."""
    if not signal_group(pgid, 0):
        return False
    members = await anyio.to_thread.run_sync(group_members, pgid)
    return bool(members)


async def command_alive(process: anyio.abc.Process) -> bool:
    """Whether a process of ``process``'s command is left: its tree's, or its group's."""
    if isinstance(process, TreeProcess):
        return await process.alive()
    return await group_alive(process.pid)


async def wait_group_gone(pgid: int) -> None:
    """Return once no live process is left in group ``pgid`` (bound it with a scope).

    The kernel has no event for "the group is empty", so this polls with a backoff from
    2 ms to 50 ms.
    """
    delay = GROUP_POLL_MIN_S
    while await group_alive(pgid):
        await anyio.sleep(delay)
        delay = min(delay * 2, GROUP_POLL_MAX_S)


@dataclass(frozen=True, slots=True)
class GroupStop:
    """What :func:`stop_group` had to do.

    Attributes:
        terminated: SIGTERM reached a live group.
        killed: members outlived the grace period and got SIGKILL.
    """

    terminated: bool
    killed: bool


async def stop_group(process: anyio.abc.Process, *, grace_s: float) -> GroupStop:
    """Stop every process in ``process``'s group and reap the leader.

    SIGTERM and SIGCONT to the group, wait until no live member is left (at most
    ``grace_s``), SIGKILL the group if anything is, then reap the leader and give killed
    members up to ``KILL_SETTLE_S`` to disappear. Safe to call again (on an empty group it
    only reaps). Bound it with a scope; run it shielded in cleanup.
    """
    if isinstance(process, TreeProcess):
        return await process.stop(grace_s=grace_s)
    if isinstance(process, GroupProcess) and process.namespaced:
        return await _stop_namespace(process, grace_s=grace_s)
    pgid = process.pid
    terminated = False
    if await group_alive(pgid):
        terminated = signal_group(pgid, signal.SIGTERM)
        signal_group(pgid, signal.SIGCONT)
        with anyio.move_on_after(grace_s):
            await wait_group_gone(pgid)
    killed = False
    if await group_alive(pgid):
        killed = signal_group(pgid, signal.SIGKILL)
    await process.wait()
    if killed:
        with anyio.move_on_after(KILL_SETTLE_S):
            await wait_group_gone(pgid)
    if terminated or killed:
        log.debug("process.group_stopped", pgid=pgid, terminated=terminated, killed=killed)
    return GroupStop(terminated=terminated, killed=killed)
