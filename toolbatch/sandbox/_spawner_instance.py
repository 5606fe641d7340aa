"""One running ``bwrap`` with the spawner program inside, as the host holds it: its
control socket, the channel its waiting supervisor holds, its mount table, and its liveness.

:class:`~toolbatch.sandbox._spawner.Spawner` decides when one starts, serves commands and is
retired; :class:`~toolbatch.sandbox._spawned.SpawnedCommand` reads a command's replies. The
protocol is in ``_spawner_program``.
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import IO, Final

from toolbatch.sandbox._process import children_by_parent, signal_each, signal_group
from toolbatch.sandbox._reaper import forget_group

__all__ = ["CREDENTIALS_BYTES", "SPAWNER_EXIT_S", "SpawnerInstance", "sender_pid"]

SPAWNER_EXIT_S: Final = 2.0
"""How long closing waits for a spawner to leave before it is killed."""
CREDENTIALS_BYTES: Final = socket.CMSG_SPACE(12)  # struct ucred {pid, uid, gid}
"""The ancillary room for the ``SCM_CREDENTIALS`` every datagram from inside carries."""


@dataclass(slots=True, eq=False)
class SpawnerInstance:
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
                        signal_each([supervisor], signal.SIGCONT)
                return False
        return True

    def take_channel(self) -> socket.socket | None:
        """The channel the waiting supervisor holds, for the command about to be sent
        (``None`` when the spawner is gone); the next one is offered after the request."""
        if self.next_channel is not None and _hung_up(self.next_channel):
            # The supervisor that took it was killed while waiting (by a command of the
            # session); the spawner has named another, which waits for a channel.
            self.next_channel.close()
            self.next_channel = None
            self.offer_channel()
        channel, self.next_channel = self.next_channel, None
        return channel

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


def sender_pid(ancillary: list[tuple[int, int, bytes]]) -> int:
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


def _mount_field(path: str) -> bytes:
    """``path`` as ``/proc/<pid>/mounts`` writes a mount point (space, tab, newline and
    backslash octal-escaped)."""
    raw = os.fsencode(path)
    for char in b"\\ \t\n":
        raw = raw.replace(bytes([char]), b"\\%03o" % char)
    return raw
