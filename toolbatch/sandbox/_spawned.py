"""A command started by the session's spawner, as the host sees it: its supervisor's replies
on the command's own channel (``P``, then ``E`` or a failed start), its exit status, and how
it is stopped (every process beneath its supervisor and in its process group).

A supervisor that its command stops (``kill -STOP $PPID``) is resumed on each quiet
``SPAWN_CHECK_S``; one that dies leaves the exit status unknown, with the reason
(:attr:`SpawnedCommand.lost`).
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from typing import Final

import anyio
import anyio.to_thread
import structlog

from toolbatch.sandbox._process import (
    GROUP_POLL_MIN_S,
    GroupStop,
    TreeProcess,
    children_by_parent,
    group_members,
    signal_each,
    signal_group,
    terminate_and_wait,
)
from toolbatch.sandbox._spawner_instance import CREDENTIALS_BYTES, SpawnerInstance, sender_pid

__all__ = ["SPAWN_REPLY_S", "SpawnedCommand"]

log = structlog.get_logger("toolbatch.sandbox")

SPAWN_REPLY_S: Final = 10.0
"""How long a live, running spawner gets to start one command (normally about 1 ms)."""
SPAWN_CHECK_S: Final = 0.25
"""How often a waiting request checks that the spawner is alive and not stopped, and a
running command's supervisor is resumed (``kill -STOP $PPID`` must not hang the call)."""
SUPERVISOR_EXIT_S: Final = 1.0
"""How long a command without leftovers waits for its supervisor to go."""
LOST_SETTLE_S: Final = 0.1
"""How long a command whose supervisor vanished waits to see whether the spawner died too."""
_REPLY_BYTES: Final = 4096


class SpawnedCommand(TreeProcess):
    """A command started by a :class:`Spawner`: its supervisor's host pid, and its exit
    status as the supervisor reports it.

    ``pid`` is the supervisor's (host) pid, which is also the id of the command's process
    group. ``returncode`` is the shell's exit code (negative for a signal), or ``None`` when
    it is not known: then :attr:`lost` says why.
    """

    def __init__(
        self,
        channel: socket.socket,
        instance: SpawnerInstance,
        release: Callable[[socket.socket], None],
    ) -> None:
        self._channel = channel
        self._instance = instance
        self._release = release
        self._pid = 0
        self._code: int | None = None
        self._alone = False
        self._eof = False
        self._released = False
        self._gone = False
        self._waiting = anyio.Lock(fast_acquire=True)  # no event-loop turn when free
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
                data, ancillary, _, _ = self._channel.recvmsg(_REPLY_BYTES, CREDENTIALS_BYTES)
            except BlockingIOError:
                break
            except OSError:
                data, ancillary = b"", []
            if not data:
                self._eof = True
                break
            if not self._pid:
                self._pid = sender_pid(ancillary)
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
        self._take(self._read())  # often there already: no wait, no event-loop turn
        while not done() and not self._gone:
            with anyio.move_on_after(SPAWN_CHECK_S) as waited:
                await anyio.wait_readable(self._channel)
            self._take(self._read())
            if self._eof:
                # Gone only once the reason is known: a wait cancelled while it is sought
                # (a caller's deadline) leaves it to the next one.
                if self._code is None and self.start_error is None:
                    self.lost = await self._lost_reason()
                self._gone = True
            elif not waited.cancelled_caught:
                continue
            elif self._pid > 0:
                # Its command may have stopped it ($PPID): it could not report. Its channel
                # is open, so it is alive and the pid is still its own.
                signal_each([self._pid], signal.SIGCONT)
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
        signal_each([self._pid], signal.SIGCONT)  # a command may have stopped it
        terminated = await terminate_and_wait(self._members, grace_s=grace_s)
        members = await anyio.to_thread.run_sync(self._members) if terminated else []
        killed = bool(members)
        signal_each(members, signal.SIGKILL)
        with anyio.move_on_after(SUPERVISOR_EXIT_S):
            await self.wait()
        if not self._ended():
            # The supervisor cannot report (stopped again, or stuck): kill it, read its EOF.
            signal_each([self._pid], signal.SIGKILL)
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
        """Let the spawner go, with the channel (once the command is done with): the
        spawner closes it soon, which frees the supervisor."""
        if not self._released:
            self._released = True
            self._release(self._channel)
