"""The shell producer's process: starting the shell, waiting for its leader, forwarding output.

``spawn_shell`` starts ``<shell> -c <command>`` (through the sandbox's spawner, under a
``bwrap`` of its own, or directly), ``wait_leader`` waits for it, a timeout or an abort,
and ``OutputForwarder`` decodes the output for a live display as it is read.
"""

from __future__ import annotations

import codecs
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc

from toolbatch.producers._base import UNWATCHED_OUTPUT, ProducerContext
from toolbatch.producers._shell_result import Reason
from toolbatch.sandbox import ProcessPolicy, open_group_process
from toolbatch.telemetry import child_environment

__all__ = [
    "OutputForwarder",
    "StopSignal",
    "exited_by",
    "spawn_shell",
    "wait_leader",
]


class OutputForwarder:
    """Decodes the output as it is read and hands it to ``ProducerContext.output``.

    Only made when someone listens (a live display): unwatched calls decode nothing. A
    character split between two reads waits for its second half; invalid bytes become
    U+FFFD, as they do in what the model receives.
    """

    __slots__ = ("_decoder", "_log", "_send")

    def __init__(self, context: ProducerContext) -> None:
        self._send = context.output
        self._log = context.log
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    @classmethod
    def of(cls, context: ProducerContext) -> OutputForwarder | None:
        return None if context.output is UNWATCHED_OUTPUT else cls(context)

    def feed(self, chunk: bytes) -> None:
        self._forward(self._decoder.decode(chunk))

    def close(self) -> None:
        self._forward(self._decoder.decode(b"", final=True))

    def _forward(self, text: str) -> None:
        if not text:
            return
        try:
            self._send(text)
        except Exception as exc:  # a broken display must not break the call
            self._log.debug("shell.output_forward_failed", error=str(exc))


class StopSignal:
    """An abort or the caller's cancellation, told to the leader's wait as it happens.

    ``set`` cancels the wait in progress directly, so waiting for the leader needs no task
    of its own beside it (a task per call costs more than the wait's own work). Nothing
    relays an abort until :meth:`watch` starts the relay (``relay``): a command that ends
    quickly never needs one.
    """

    __slots__ = ("_relay", "_scope", "_set")

    def __init__(self, relay: Callable[[], object] | None = None) -> None:
        self._set = False
        self._scope: anyio.CancelScope | None = None
        self._relay = relay

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self._scope is not None:
            self._scope.cancel()

    def watch(self) -> None:
        """Start relaying the abort and the caller's cancellation to :meth:`set` (once)."""
        relay, self._relay = self._relay, None
        if relay is not None:
            relay()

    @property
    def watching(self) -> bool:
        """Whether :meth:`watch` started the relay."""
        return self._relay is None


async def wait_leader(process: anyio.abc.Process, *, deadline: float, stop: StopSignal) -> Reason:
    """Wait for the leader to exit, the ``deadline`` (a timeout), or ``stop``, whichever
    comes first."""
    if stop.is_set():
        return "cancelled"
    with anyio.CancelScope(deadline=deadline) as scope:
        stop._scope = scope
        try:
            await process.wait()
        finally:
            stop._scope = None
    if not scope.cancelled_caught:
        return "exited"
    return "cancelled" if stop.is_set() else "timeout"


async def exited_by(process: anyio.abc.Process, deadline: float) -> bool:
    """Wait for the leader to exit until ``deadline``; whether it did."""
    with anyio.CancelScope(deadline=deadline):
        await process.wait()
        return True
    return False


async def spawn_shell(
    argv: list[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    policy: ProcessPolicy | None,
    write_fd: int,
    absent: Sequence[Path] = (),
) -> anyio.abc.Process:
    """Start the shell: through the session's spawner when the policy has one (about
    1 ms), else under a ``bwrap`` of its own, or directly. ``absent``: the policy's
    protected paths found missing just before (``absent_protected``)."""
    env = child_environment(env)
    if policy is not None and policy.spawner is not None:
        spawned = await policy.spawner.spawn(
            argv, cwd=cwd, env=env, stdout=write_fd, stderr=write_fd, absent=absent
        )
        if spawned is not None:
            return spawned
    seccomp_fd = policy.open_seccomp() if policy is not None else None
    try:
        if policy is not None:
            argv = policy.command_argv(argv, cwd=cwd, seccomp_fd=seccomp_fd)
        return await open_group_process(
            argv,
            stdout=write_fd,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            spawn_thread=policy.spawn_thread if policy is not None else None,
            namespaced=policy is not None and policy.namespaced,
            pass_fds=(seccomp_fd,) if seccomp_fd is not None else (),
        )
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
