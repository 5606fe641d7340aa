"""One long-lived ``bwrap`` per session that starts every command: a few forks, not a sandbox.

A fresh ``bwrap`` per command costs about 3.5 ms on the 2-core development machine (namespace
creation, mounts, two extra processes), several times the cost of the command itself. So a
namespaced :class:`~toolbatch.sandbox.ProcessPolicy` starts one ``bwrap`` at its first command
(the same namespaces, binds, protected paths, ``--cap-drop ALL``, ``--die-with-parent``,
seccomp filter and, being started from the policy's Landlock-confined thread, the same
Landlock domain) running a small Python program (``_spawner_program``) that forks one
*supervisor* per command, which starts the shell. See that module for the protocol.

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
import contextlib
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import anyio
import anyio.to_thread
import structlog

from toolbatch.sandbox._process import (
    GROUP_POLL_MAX_S,
    GROUP_POLL_MIN_S,
    GroupStop,
    SpawnThread,
    TreeProcess,
    children_by_parent,
    group_members,
    signal_group,
)
from toolbatch.sandbox._reaper import ensure_reaper, forget_group, reap_with_host
from toolbatch.sandbox._spawner_program import SPAWNER_SOURCE

__all__ = ["SPAWN_REPLY_S", "SpawnedCommand", "Spawner", "SpawnerLost"]

log = structlog.get_logger("toolbatch.sandbox")

SPAWNER_START_S: Final = 10.0
"""How long a starting spawner gets to say ``ready``."""
SPAWN_REPLY_S: Final = 10.0
"""How long a live, running spawner gets to start one command (normally about 1 ms)."""
SPAWN_CHECK_S: Final = 0.25
"""How often a waiting request checks that the spawner is alive and not stopped, and a
running command's supervisor is resumed (``kill -STOP $PPID`` must not hang the call)."""
SPAWNER_EXIT_S: Final = 2.0
"""How long closing waits for a spawner to leave before it is killed."""
SUPERVISOR_EXIT_S: Final = 1.0
"""How long a command without leftovers waits for its supervisor to go."""
LOST_SETTLE_S: Final = 0.1
"""How long a command whose supervisor vanished waits to see whether the spawner died too."""
INLINE_REQUEST_BYTES: Final = 64 * 2**10
"""Larger requests (a long command, a large environment) travel in a memfd."""
_REPLY_BYTES: Final = 4096
_CREDENTIALS: Final = socket.CMSG_SPACE(12)  # struct ucred {pid, uid, gid}


class SpawnerLost(Exception):
    """The session's spawner died, stopped or did not answer: the command was not started."""


@dataclass(slots=True, eq=False)
class _Instance:
    """One running ``bwrap`` with the spawner program inside."""

    popen: subprocess.Popen[bytes]
    control: socket.socket
    key: tuple[tuple[str, int, int], ...]
    next_channel: socket.socket | None = None
    """The host's end of the channel the waiting supervisor holds (its next command's)."""
    mounts: IO[bytes] | None = None
    """The sandbox's ``/proc/<pid>/mounts``: the kernel flags it when its mount table changes."""
    watch: select.poll | None = None
    mount_points: frozenset[bytes] = frozenset()
    """The binds of the watched paths, as the mount table names them, when it started."""
    running: int = 0
    retired: bool = False
    broken: bool = False

    def alive(self) -> bool:
        return not self.broken and self.popen.poll() is None

    def watch_mounts(self, pid: int) -> None:
        """Watch the mount table of the namespace ``pid`` (the spawner's) is in."""
        if pid <= 0:
            return
        with contextlib.suppress(OSError):
            self.mounts = open(f"/proc/{pid}/mounts", "rb")  # noqa: SIM115 (kept open)
            self.watch = select.poll()
            self.watch.register(self.mounts, select.POLLPRI | select.POLLERR)
            # Only the binds made from the paths the key watches: the host's own mounts
            # under a writable root (``/tmp``) come and go in here too.
            binds = {_mount_field(path) for path, _, _ in self.key}
            self.mount_points = frozenset(binds & self._mount_points())

    def _mount_points(self) -> frozenset[bytes]:
        assert self.mounts is not None
        self.mounts.seek(0)
        return frozenset(line.split()[1] for line in self.mounts.read().splitlines() if line)

    def mounts_changed(self) -> bool:
        """Whether a bind went away: the host removed or renamed a protected path, which
        detaches its read-only bind here (a command cannot mount or unmount).

        The kernel flags every change of the table, and the host's own mounts under a
        writable root (``/tmp``) propagate in and out: only a bind of a watched path that
        is gone counts.
        """
        if self.watch is None or not self.watch.poll(0):
            return False
        try:
            now = self._mount_points()  # reading the table clears the flag
        except OSError:
            return True
        return not self.mount_points <= now

    def stopped(self) -> bool:
        """Whether the spawner (beneath ``bwrap`` and its init) is stopped (``kill -STOP``
        by a command) or gone; a supervisor found stopped is resumed (its command stopped
        its $PPID before the supervisor could report that it started)."""
        tree = children_by_parent()
        for init in tree.get(self.popen.pid, []):
            for spawner in tree.get(init, []):
                if _state(spawner) in (b"T", b"t", b"X", b"Z"):
                    return True
                for supervisor in tree.get(spawner, []):
                    if _state(supervisor) in (b"T", b"t"):
                        _signal_each([supervisor], signal.SIGCONT)
                return False
        return True

    def offer_channel(self) -> None:
        """Hand the waiting supervisor the channel of the next command (``C``)."""
        host_end, command_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # its pid, translated
        host_end.setblocking(False)
        try:
            self.control.sendmsg(
                [b"C"],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [command_end.fileno()]))],
            )
        except OSError:
            host_end.close()
            self.broken = True  # the spawner is gone or stuck: the next command replaces it
        else:
            self.next_channel = host_end
        finally:
            command_end.close()

    def shut(self) -> None:
        """Close the control socket: the spawner reads EOF and its namespace ends."""
        with contextlib.suppress(OSError):
            self.control.close()
        if self.next_channel is not None:
            self.next_channel.close()
            self.next_channel = None
        if self.mounts is not None:
            self.mounts.close()
            self.mounts = None
            self.watch = None

    def kill(self) -> None:
        self.broken = True
        self.shut()
        signal_group(self.popen.pid, signal.SIGKILL)

    def reap(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the ``bwrap`` to exit; ``True`` once it has."""
        try:
            self.popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        forget_group(self.popen.pid)
        return True


def _state(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return b"X"
    return stat[stat.rfind(b")") + 2 :][:1]


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
    _current: _Instance | None = None
    _retired: list[_Instance] = field(default_factory=list)
    _closed: bool = False
    unavailable: str | None = None
    """Why the spawner cannot start here, once it failed to (commands then run one ``bwrap``
    each)."""

    def _key(self) -> tuple[tuple[str, int, int], ...]:
        key = []
        for path in self.watched:
            try:
                stat = os.stat(path)
            except OSError:
                continue
            key.append((os.fspath(path), stat.st_dev, stat.st_ino))
        return tuple(key)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str],
        env: Mapping[str, str] | None,
        stdout: int,
        stderr: int,
    ) -> SpawnedCommand | None:
        """Start ``argv`` in ``cwd`` with ``env`` (``None``: this process's) and stdin from
        /dev/null; ``None`` when no spawner can run here (the caller falls back).

        Raises:
            OSError: the program could not be started (not found, not executable, bad cwd).
            ValueError: an argument holds a NUL byte.
            SpawnerLost: the spawner died or stopped before it started the command.
        """
        if self.unavailable is not None or self._closed:
            return None
        environment = dict(os.environ if env is None else env)
        payload = marshal.dumps(([os.fspath(arg) for arg in argv], os.fspath(cwd), environment))
        for attempt in range(2):
            instance = await self._instance()
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

    async def _instance(self) -> _Instance | None:
        if self._starting is None:
            self._starting = anyio.Lock()
        # One start at a time: commands of a first batch wait for one spawner, not start one
        # each.
        async with self._starting:
            return await self._current_or_new()

    async def _current_or_new(self) -> _Instance | None:
        key = self._key()
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

    def _retire(self, instance: _Instance) -> None:
        """Let ``instance`` go once its commands are done (call with the lock held)."""
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

    def _release(self, instance: _Instance) -> None:
        with self._lock:
            instance.running -= 1
            if instance.retired and instance.running == 0:
                instance.shut()

    async def _start(self, key: tuple[tuple[str, int, int], ...]) -> _Instance:
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
        instance = _Instance(popen=popen, control=parent, key=key)
        parent.setblocking(False)
        try:
            with anyio.fail_after(SPAWNER_START_S):
                await anyio.wait_readable(parent)
            ready, ancillary, _, _ = parent.recvmsg(16, _CREDENTIALS)
        except (OSError, TimeoutError) as exc:
            ready = b""
            reason = str(exc) or type(exc).__name__
        else:
            reason = "it exited"
            instance.watch_mounts(_sender(ancillary))
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
        self, instance: _Instance, payload: bytes, stdout: int, stderr: int
    ) -> SpawnedCommand:
        if instance.next_channel is not None and _hung_up(instance.next_channel):
            # The supervisor that took it was killed while waiting (by a command of the
            # session); the spawner has forked another, which waits for a channel.
            instance.next_channel.close()
            instance.next_channel = None
            instance.offer_channel()
        channel = instance.next_channel
        if channel is None or not instance.alive():
            self._release(instance)
            raise _Refused
        instance.next_channel = None
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
        instance.offer_channel()  # for the supervisor the spawner is forking now
        command = SpawnedCommand(channel, instance, self)
        # Its P is usually there already (sent when it took the channel); the rest is read
        # by wait(): one wake-up of the host per command, when it ends.
        command.poll()
        return command

    def close(self) -> None:
        """End every spawner of this policy and reap it (killed if it does not leave)."""
        with self._lock:
            self._closed = True
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


def _sender(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The sender's pid (in this PID namespace) from a datagram's ``SCM_CREDENTIALS``."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            return int.from_bytes(payload[:4], sys.byteorder, signed=True)
    return 0


def _hung_up(channel: socket.socket) -> bool:
    """Whether the other end of ``channel`` is closed (its holder died)."""
    watch = select.poll()
    watch.register(channel, select.POLLHUP)
    return any(events & select.POLLHUP for _, events in watch.poll(0))


class _Refused(Exception):
    """The spawner's control socket is closed: it had died before this request."""


def _stderr(instance: _Instance) -> str:
    instance.reap(SPAWNER_EXIT_S)
    stream = instance.popen.stderr
    if stream is None:
        return "no message"
    with stream:
        return stream.read(4096).decode("utf-8", "replace").strip() or "no message"


class SpawnedCommand(TreeProcess):
    """A command started by a :class:`Spawner`: its supervisor's host pid, and its exit
    status as the supervisor reports it.

    ``pid`` is the supervisor's (host) pid, which is also the id of the command's process
    group. ``returncode`` is the shell's exit code (negative for a signal), or ``None`` when
    it is not known: then :attr:`lost` says why.
    """

    def __init__(self, channel: socket.socket, instance: _Instance, spawner: Spawner) -> None:
        self._channel = channel
        self._instance = instance
        self._spawner = spawner
        self._pid = 0
        self._code: int | None = None
        self._alone = False
        self._eof = False
        self._released = False
        self._gone = False
        self._waiting = anyio.Lock()
        self.lost: str | None = None
        """Why the exit status is unknown (the supervisor or the spawner died), if so."""
        self.start_error: OSError | ValueError | None = None
        """Why the shell could not be started (not found, ``E2BIG``, a bad cwd), if so."""

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        return self._code

    def _read(self) -> list[bytes]:
        """The datagrams waiting on the channel (``[]`` at EOF, which sets ``_eof``)."""
        replies = []
        while not self._eof:
            try:
                data, ancillary, _, _ = self._channel.recvmsg(_REPLY_BYTES, _CREDENTIALS)
            except BlockingIOError:
                break
            except OSError:
                data, ancillary = b"", []
            if not data:
                self._eof = True
                break
            if not self._pid:
                self._pid = _sender(ancillary)
            replies.append(data)
        return replies

    def _take(self, replies: list[bytes]) -> None:
        for reply in replies:
            kind = reply[:1]
            if kind == b"E":
                code, _, alone = reply[1:].partition(b" ")
                self._code = int(code)
                self._alone = alone == b"1"
            elif kind == b"X":
                number, _, message = reply[1:].partition(b" ")
                self.start_error = OSError(int(number), message.decode("utf-8", "replace"))
            elif kind == b"V":
                self.start_error = ValueError(reply[1:].decode("utf-8", "replace"))

    def _ended(self) -> bool:
        return self._code is not None or self.start_error is not None or self._gone

    async def _collect(self, done: Callable[[], bool]) -> None:
        """Read the supervisor's replies until ``done()`` or none can come; on each quiet
        ``SPAWN_CHECK_S``, resume a supervisor its command stopped, or, before the
        supervisor is known, check that the spawner is alive, running and answering."""
        deadline = anyio.current_time() + SPAWN_REPLY_S
        while not done() and not self._gone:
            with anyio.move_on_after(SPAWN_CHECK_S) as waited:
                await anyio.wait_readable(self._channel)
            self._take(self._read())
            if self._eof:
                self._gone = True
                if self._code is None and self.start_error is None:
                    self.lost = await self._lost_reason()
            elif not waited.cancelled_caught:
                continue
            elif self._pid > 0:
                # Its command may have stopped it ($PPID): it could not report. Its channel
                # is open, so it is alive and the pid is still its own.
                _signal_each([self._pid], signal.SIGCONT)
            elif not self._instance.alive() or self._instance.stopped():
                self._lose("the sandbox's spawner was stopped or killed")
            elif anyio.current_time() > deadline:
                self._lose(f"the sandbox's spawner did not answer within {SPAWN_REPLY_S:g} s")

    def _lose(self, reason: str) -> None:
        self._instance.kill()  # it is of no use now: its namespace goes, its commands with it
        log.warning("sandbox.spawner_lost", reason=reason, pid=self._instance.popen.pid)
        self.lost = f"{reason}, so the command may not have run; the next command starts a new one"
        self._gone = True

    async def wait(self) -> int:
        """Wait for the shell to exit; its exit code, 127 when it could not start
        (:attr:`start_error`), -SIGKILL when its end is unknown (:attr:`lost`)."""
        async with self._waiting:
            await self._collect(self._ended)
        if self._code is not None:
            return self._code
        return 127 if self.start_error is not None else -signal.SIGKILL

    def poll(self) -> None:
        """Take the replies already there (the supervisor's pid, often)."""
        self._take(self._read())

    async def alive(self) -> bool:
        """Whether a process of the command is left (after the shell's exit): none when the
        supervisor said so (it leaves at once), else those it holds or its group does."""
        if self._alone or self._pid <= 0 or self.start_error is not None:
            return False
        return bool(await anyio.to_thread.run_sync(self._members))

    async def _lost_reason(self) -> str:
        # The spawner and the supervisors die together when a command kills them all (kill
        # -9 -1): give the spawner's death a moment to show before blaming the supervisor.
        spawner_gone = not self._instance.alive()
        with anyio.move_on_after(LOST_SETTLE_S):
            while not spawner_gone:
                spawner_gone = await anyio.to_thread.run_sync(self._instance.stopped)
                if not spawner_gone:
                    await anyio.sleep(GROUP_POLL_MIN_S)
        if spawner_gone:
            self._instance.kill()
            return (
                "the sandbox's spawner ended while the command ran (a command of this session "
                "may have killed it), so its exit status is unknown; the next command starts a "
                "new one"
            )
        return (
            "the command's supervisor in the sandbox was killed (by the command itself?), so "
            "its exit status is unknown"
        )

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, signal: int) -> None:
        if self._pid > 0:
            signal_group(self._pid, signal)

    def _members(self) -> list[int]:
        """The command's live processes but the supervisor: those beneath it (a subreaper:
        ``setsid`` escapees included) and those left in its process group."""
        tree = children_by_parent()
        found: set[int] = set()
        pending = list(tree.get(self._pid, []))
        while pending:
            pid = pending.pop()
            if pid not in found:
                found.add(pid)
                pending.extend(tree.get(pid, []))
        found.update(pid for pid in group_members(self._pid) if pid != self._pid)
        return sorted(found)

    async def stop(self, *, grace_s: float) -> GroupStop:
        """SIGTERM and SIGCONT to every process of the command, SIGKILL to those left after
        the grace, then wait for the supervisor's report (killed too if it cannot give one)."""
        if self._pid <= 0:  # its supervisor has not said who it is yet
            with anyio.move_on_after(SPAWN_REPLY_S):
                async with self._waiting:
                    await self._collect(lambda: self._pid > 0 or self._ended())
            if self._pid <= 0:
                return GroupStop(terminated=False, killed=False)
        _signal_each([self._pid], signal.SIGCONT)  # a command may have stopped it
        terminated = False
        members = await anyio.to_thread.run_sync(self._members)
        if members:
            _signal_each(members, signal.SIGTERM)
            _signal_each(members, signal.SIGCONT)
            terminated = True
            delay = GROUP_POLL_MIN_S
            with anyio.move_on_after(grace_s):
                while await anyio.to_thread.run_sync(self._members):
                    await anyio.sleep(delay)
                    delay = min(delay * 2, GROUP_POLL_MAX_S)
            members = await anyio.to_thread.run_sync(self._members)
        killed = bool(members)
        _signal_each(members, signal.SIGKILL)
        with anyio.move_on_after(SUPERVISOR_EXIT_S):
            await self.wait()
        if not self._ended():
            # The supervisor cannot report (stopped again, or stuck): kill it, read its EOF.
            _signal_each([self._pid], signal.SIGKILL)
            with anyio.move_on_after(SUPERVISOR_EXIT_S):
                await self.wait()
        return GroupStop(terminated=terminated, killed=killed)

    async def aclose(self) -> None:
        """Wait for the exit status (stop the command first), then let go."""
        try:
            if not self._ended():
                await self.wait()
        finally:
            self.release()

    def release(self) -> None:
        """Close the channel and let the spawner go (once the command is done with)."""
        self._channel.close()
        if not self._released:
            self._released = True
            self._spawner._release(self._instance)


def _signal_each(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _mount_field(path: str) -> bytes:
    """``path`` as ``/proc/<pid>/mounts`` writes a mount point (space, tab, newline and
    backslash octal-escaped)."""
    raw = os.fsencode(path)
    for char in b"\\ \t\n":
        raw = raw.replace(bytes([char]), b"\\%03o" % char)
    return raw
