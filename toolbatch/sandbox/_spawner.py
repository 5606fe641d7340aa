"""One long-lived ``bwrap`` per session that starts every command: no new sandbox per command.

A fresh ``bwrap`` per command costs about 3.5 ms on the 2-core development machine (namespace
creation, mounts, two extra processes), several times the cost of the command itself. So a
namespaced :class:`~toolbatch.sandbox.ProcessPolicy` starts one ``bwrap`` at its first command
(the same namespaces, binds, protected paths, ``--cap-drop ALL``, ``--die-with-parent``,
seccomp filter and, being started from the policy's Landlock-confined thread, the same
Landlock domain) running a small Python program (``_spawner_program``) whose *supervisors*
(kept from one command to the next, forked only when none is free) start each shell. See that
module for the protocol.

The host's pid of a command's supervisor comes from ``SCM_CREDENTIALS``: with ``SO_PASSCRED``
on the host's end, the kernel attaches the sender's pid to every datagram, translated into
the receiver's PID namespace. It is exact (no ``/proc`` scan, no guess among ``NSpid`` lines)
and free (it rides on the reply the host waits for anyway); a pidfd opened on it then tells
when the supervisor has gone.

What the host keeps from the per-command design: it stops a command by signalling the
supervisor's process group and every process beneath the supervisor (a subreaper, so a
``setsid`` escapee stays beneath it), SIGTERM and SIGCONT, then SIGKILL after the grace. The
``bwrap`` is registered with the host reaper: killing the host kills it, and its init, and
with it the whole namespace.

What is new: the session's commands share one PID (and IPC, mount, network) namespace: they
see and can signal each other (the same trust domain: one model's session), but never the
host. A command that kills or stops the spawner breaks only this session's spawner: the
commands it was running end with a clear error (their channels reach EOF; a request that
gets no reply within ``SPAWN_REPLY_S`` is answered with an error too) and the next command
starts a new one; a supervisor killed while it waited for a command is replaced at once (the
spawner reads EOF on its pipe; the host, finding the channel it gave it hung up, gives the new
one another). A change of the protected or writable paths as they exist (a protected path
made, a file replaced) retires the spawner once its commands are done, so that a new one binds
what exists now, as a fresh ``bwrap`` per command did.
"""

from __future__ import annotations

import array
import marshal
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import structlog

from toolbatch.sandbox._process import SpawnThread
from toolbatch.sandbox._reaper import ensure_reaper, reap_with_host
from toolbatch.sandbox._spawned import SpawnedCommand
from toolbatch.sandbox._spawner_instance import (
    CREDENTIALS_BYTES,
    SPAWNER_EXIT_S,
    SpawnerInstance,
    sender_pid,
)
from toolbatch.sandbox._spawner_program import SPAWNER_SOURCE

__all__ = ["Spawner", "SpawnerLost"]

log = structlog.get_logger("toolbatch.sandbox")

SPAWNER_START_S: Final = 10.0
"""How long a starting spawner gets to say ``ready``."""
INLINE_REQUEST_BYTES: Final = 64 * 2**10
"""Larger requests (a long command, a large environment) travel in a memfd."""


class SpawnerLost(Exception):
    """The session's spawner died, stopped or did not answer: the command was not started."""


@dataclass(slots=True, eq=False)
class Spawner:
    """Starts a namespaced policy's commands through one long-lived ``bwrap`` (module doc).

    Made by the policy; :meth:`spawn` starts the ``bwrap`` at the first command; :meth:`close`
    (when the policy closes) ends it and reaps it.
    """

    wrapper: tuple[str, ...]
    """The ``bwrap`` options before the protected paths (``namespace_argv``)."""
    binds: Callable[[], list[str]]
    """The ``--ro-bind`` options of the protected paths that exist now."""
    watched: tuple[Path, ...]
    """The paths whose identity (device, inode) the binds depend on."""
    environment: Mapping[str, str]
    seccomp: Callable[[], int | None]
    spawn_thread: SpawnThread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _starting: anyio.Lock | None = None
    _current: SpawnerInstance | None = None
    _retired: list[SpawnerInstance] = field(default_factory=list)
    _let_go: list[socket.socket] = field(default_factory=list)
    """Channels of commands the host is done with, closed once the next request is sent."""
    _closed: bool = False
    _watched_names: tuple[str, ...] = field(default=(), init=False, repr=False)
    unavailable: str | None = None
    """Why the spawner cannot start here, once it failed to (commands then run one ``bwrap``
    each)."""

    def __post_init__(self) -> None:
        self._watched_names = tuple(os.fspath(path) for path in self.watched)

    def _key(self, absent: Collection[Path] = ()) -> tuple[tuple[str, int, int], ...]:
        """(path, device, inode) of each watched path that exists now (``absent``: paths
        the caller has just found missing, not looked up again)."""
        missing = {os.fspath(path) for path in absent}
        key = []
        for name in self._watched_names:  # stat'ed for every command: strings made once
            if name in missing:
                continue
            try:
                stat = os.stat(name)
            except OSError:
                continue
            key.append((name, stat.st_dev, stat.st_ino))
        return tuple(key)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None,
        stdout: int,
        stderr: int,
        absent: Collection[Path] = (),
    ) -> SpawnedCommand | None:
        """Start ``argv`` in ``cwd`` with ``env`` (``None``: this process's) and stdin from
        /dev/null; ``None`` when no spawner can run here (the caller falls back).
        ``absent``: the protected paths the caller has just found missing (the policy's
        ``absent_protected``), which need no second look to tell whether the spawner's
        binds are still those of the paths as they exist.

        Raises:
            OSError: the program could not be started (not found, not executable, bad cwd).
            ValueError: an argument holds a NUL byte.
            SpawnerLost: the spawner died or stopped before it started the command.
        """
        if self.unavailable is not None or self._closed:
            return None
        # marshal takes a dict: the policy's environment is one, copied only otherwise.
        environment = env if type(env) is dict else dict(os.environ if env is None else env)
        payload = marshal.dumps(([os.fspath(arg) for arg in argv], os.fspath(cwd), environment))
        for attempt in range(2):
            instance = await self._instance(absent)
            if instance is None:
                return None
            try:
                return await self._request(instance, payload, stdout, stderr)
            except _Refused:
                # The spawner had already gone (a command killed it): start a new one, once.
                instance.kill()
                if attempt:
                    raise SpawnerLost("the sandbox's spawner refused the command twice") from None
        raise AssertionError("unreachable")

    async def _instance(self, absent: Collection[Path]) -> SpawnerInstance | None:
        if self._starting is None:
            # No yield when free (the rule): a yield per command is an event-loop turn.
            self._starting = anyio.Lock(fast_acquire=True)
        # One start at a time: commands of a first batch wait for one spawner, not start one
        # each.
        async with self._starting:
            return await self._current_or_new(absent)

    async def _current_or_new(self, absent: Collection[Path]) -> SpawnerInstance | None:
        key = self._key(absent)
        with self._lock:
            self._reap_retired()
            current = self._current
            if (
                current is not None
                and current.alive()
                and current.key == key
                and not current.mounts_changed()
            ):
                current.running += 1
                return current
            if current is not None:
                self._current = None
                self._retire(current)
        try:
            instance = await self._start(key)
        except (OSError, ValueError, SpawnerLost) as exc:
            self.unavailable = str(exc) or type(exc).__name__
            log.warning(
                "sandbox.spawner_unavailable",
                reason=self.unavailable,
                consequence="each command starts its own bwrap (about 3.5 ms more per command)",
            )
            return None
        with self._lock:
            if self._closed:
                instance.kill()
                instance.reap(SPAWNER_EXIT_S)
                return None
            self._current = instance
            instance.running += 1
            return instance

    def _retire(self, instance: SpawnerInstance) -> None:
        """Let ``instance`` go once its commands are done (call with the lock held)."""
        self._close_let_go()  # its spawner leaves only once its supervisors are free
        instance.retired = True
        if instance.running == 0 or not instance.alive():
            instance.shut()
        self._retired.append(instance)

    def _reap_retired(self) -> None:
        self._retired = [
            instance
            for instance in self._retired
            if not (instance.popen.poll() is not None and instance.reap(0))
        ]

    def _release(self, instance: SpawnerInstance, channel: socket.socket | None = None) -> None:
        """A command of ``instance`` is done with; its ``channel`` is closed once the next
        request is sent (its supervisor, woken by that, then comes free while the next
        command runs rather than while the host finishes this one), or at once when
        ``instance`` is retired or the spawner closed (a command released after the session
        closed)."""
        with self._lock:
            instance.running -= 1
            if channel is not None:
                self._let_go.append(channel)
            if instance.retired or self._closed:  # no next request: close it now
                self._close_let_go()
                if instance.running == 0:
                    instance.shut()

    def _close_let_go(self) -> None:
        """Close the channels of the commands the host is done with (their supervisors come
        free); call with the lock held."""
        for channel in self._let_go:
            channel.close()
        self._let_go.clear()

    async def _start(self, key: tuple[tuple[str, int, int], ...]) -> SpawnerInstance:
        ensure_reaper()  # from this (unconfined) thread, before the spawn
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the spawner's pid
        seccomp_fd = self.seccomp()
        filters = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        argv = [
            *self.wrapper,
            *self.binds(),
            *filters,
            "--chdir",
            "/",
            "--",
            sys.executable,
            "-I",
            "-S",
            "-c",
            SPAWNER_SOURCE,
            str(child.fileno()),
        ]
        pass_fds = [child.fileno(), *([seccomp_fd] if seccomp_fd is not None else [])]

        def start() -> subprocess.Popen[bytes]:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd="/",
                env=dict(self.environment),
                start_new_session=True,
                pass_fds=pass_fds,
            )
            reap_with_host(popen.pid)
            return popen

        try:
            # From the confined thread when there is one (its Landlock domain is inherited);
            # else from this one: --die-with-parent follows the thread that forks bwrap, and a
            # worker thread may exit while the session still runs.
            popen = start() if self.spawn_thread is None else await self.spawn_thread.run(start)
        finally:
            child.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        instance = SpawnerInstance(popen=popen, control=parent, key=key)
        parent.setblocking(False)
        try:
            with anyio.fail_after(SPAWNER_START_S):
                await anyio.wait_readable(parent)
            ready, ancillary, _, _ = parent.recvmsg(16, CREDENTIALS_BYTES)
        except (OSError, TimeoutError) as exc:
            ready = b""
            reason = str(exc) or type(exc).__name__
        else:
            reason = "it exited"
            instance.watch_mounts(sender_pid(ancillary))
            instance.offer_channel()
        if ready != b"ready":
            instance.kill()
            said = await anyio.to_thread.run_sync(_stderr, instance)
            raise SpawnerLost(f"the sandbox's spawner did not start ({reason}): {said}")
        if popen.stderr is not None:
            popen.stderr.close()
        log.debug("sandbox.spawner_started", pid=popen.pid, binds=len(key))
        return instance

    async def _request(
        self, instance: SpawnerInstance, payload: bytes, stdout: int, stderr: int
    ) -> SpawnedCommand:
        channel = instance.take_channel()
        if channel is None or not instance.alive():
            if channel is not None:
                channel.close()
            self._release(instance)
            raise _Refused
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        fds = [devnull, stdout, stderr]
        memfd = None
        try:
            if len(payload) > INLINE_REQUEST_BYTES:
                memfd = os.memfd_create("toolbatch-request", os.MFD_CLOEXEC)
                os.write(memfd, payload)
                os.lseek(memfd, 0, os.SEEK_SET)
                fds.append(memfd)
                payload = b""
            try:
                instance.control.sendmsg(
                    [b"R" + payload],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
                )
            except BlockingIOError as exc:
                raise SpawnerLost("the sandbox's spawner is not reading requests") from exc
            except OSError as exc:
                raise _Refused from exc
        except BaseException:
            channel.close()
            self._release(instance)
            raise
        finally:
            os.close(devnull)
            if memfd is not None:
                os.close(memfd)
        instance.offer_channel()  # for the next reader, which the spawner is naming now
        if self._let_go:
            with self._lock:
                self._close_let_go()
        command = SpawnedCommand(channel, instance, lambda done: self._release(instance, done))
        # Its P is usually there already (sent when it took the channel); the rest is read
        # by wait(): one wake-up of the host per command, when it ends.
        command.poll()
        return command

    def close(self) -> None:
        """End every spawner of this policy and reap it (killed if it does not leave)."""
        with self._lock:
            self._closed = True
            self._close_let_go()
            instances = [*self._retired, *([self._current] if self._current else [])]
            self._current = None
            self._retired = []
        for instance in instances:
            instance.shut()
        deadline = time.monotonic() + SPAWNER_EXIT_S
        for instance in instances:
            if not instance.reap(max(0.0, deadline - time.monotonic())):
                instance.kill()
                instance.reap(SPAWNER_EXIT_S)


class _Refused(Exception):
    """The spawner's control socket is closed: it had died before this request."""


def _stderr(instance: SpawnerInstance) -> str:
    instance.reap(SPAWNER_EXIT_S)
    stream = instance.popen.stderr
    if stream is None:
        return "no message"
    with stream:
        return stream.read(4096).decode("utf-8", "replace").strip() or "no message"
