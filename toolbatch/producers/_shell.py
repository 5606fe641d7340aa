"""The shell producer: ``run_shell_command``, with streamed capture and bounded memory.

How a command runs
    The command runs as ``bash -c <command>`` in a new session (its own process group),
    with stdin from /dev/null. stdout and stderr are the *same* pipe (``stderr=STDOUT``), so
    the output is merged in the exact order the command wrote it, as a terminal would show
    it. The price is that the model cannot tell the two streams apart; keeping them apart
    would lose their relative order, which matters more when reading a failing build. What
    is read from the pipe, kept in memory, saved and shown is ``_capture``'s job; this module
    spawns, supervises and stops the process group (with ``_shell_process``) and composes the
    result (with ``_shell_result``).

What the model gets (``ToolResult.content``)
    At or under the trigger: the whole output. Over it: a preview of about
    ``preview_chars`` (a fifth head, the rest tail, so the end stays visible) with the
    artifact path. The exit information (exit code, signal, timeout or cancellation) is
    always the last line. A non-zero exit code or a death by signal is a normal result:
    the command ran and its failure is information for the model, not a tool failure.
    Only a timeout (``error.type == "timeout"``), an abort through ``context.cancelled``
    (``"cancelled"``), bad arguments (``"invalid_args"``) or a shell that cannot start
    (``"execution_failed"``) set ``ToolResult.error``; the first two still carry the partial
    output.

Sandbox, environment, host death
    A ``ProcessPolicy`` (the producer's own, else ``context.process_policy``, else none)
    decides the commands' environment and the sandbox they run in: under the session's
    ``bwrap``, started once from the policy's Landlock-confined thread, whose spawner starts
    each command (see ``toolbatch.sandbox``; a ``bwrap`` per command where it cannot start).
    With a required sandbox that cannot be enforced, every call fails with
    ``"sandbox_unavailable"``. A failing command whose output mentions a refused access
    ends with a note naming the sandbox; one that looks offline while the network is off,
    with a note saying how to allow it; one that created a protected name (``.git``,
    ``.mcp.json``, ...) finds it removed, and a note says so.
    Every group (or the session's ``bwrap``) is registered with the host reaper, so
    commands die with the host.

Aborts keep the output
    The command runs in a shielded scope: an abort (``context.cancelled``) or the caller's
    cancellation stops the group, drains the pipe and commits the artifact (bounded by the
    kill grace, the drain and ``CLEANUP_S``). On cancellation that partial result goes to
    ``context.partial_result`` before the cancellation propagates. A command that ends
    within ``QUICK_COMMAND_S`` (50 ms; most do) is read and awaited by the calling task
    alone; only one still running then gets the task that relays an abort and the one that
    supervises its leader beside the reading, so an abort in those first 50 ms is acted on
    when they end, at the latest.

What the user gets (``ToolResult.display``)
    A string: the whole output up to the trigger; past it, a head-and-tail window of about
    ``display_window_bytes`` with the artifact path; a status line when there is no output;
    the exit information last.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import anyio.abc
import anyio.lowlevel
import structlog
from pydantic import JsonValue

from toolbatch._core import ToolCall, ToolResult
from toolbatch.errors import ConfigError
from toolbatch.producers._base import ProducerContext, ToolDeclaration
from toolbatch.producers._capture import (
    BINARY_SNIFF_BYTES,
    MAX_UTF8_BYTES_PER_CHAR,
    ArtifactSink,
    Capture,
    Kind,
    ReadWindow,
    Saved,
    classify,
    human_bytes,
    pump,
    save,
)
from toolbatch.producers._shell_process import (
    OutputForwarder,
    StopSignal,
    exited_by,
    spawn_shell,
    wait_leader,
)
from toolbatch.producers._shell_result import Ending, ResultComposer
from toolbatch.sandbox import (
    ProcessPolicy,
    SpawnedCommand,
    SpawnerLost,
    command_alive,
    open_pipe,
    stop_group,
)

__all__ = [
    "DEFAULT_DISPLAY_WINDOW_BYTES",
    "DEFAULT_DRAIN_S",
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_OUTPUT_TRIGGER_CHARS",
    "DEFAULT_PREVIEW_CHARS",
    "DEFAULT_SHELL_TIMEOUT_S",
    "MAX_SHELL_TIMEOUT_S",
    "SHELL_TOOL_NAME",
    "ShellProducer",
]

log = structlog.get_logger("toolbatch.producers.shell")

SHELL_TOOL_NAME: Final = "run_shell_command"
DEFAULT_OUTPUT_TRIGGER_CHARS: Final = 30_000
DEFAULT_PREVIEW_CHARS: Final = 4_000
DEFAULT_DISPLAY_WINDOW_BYTES: Final = 64 * 2**10
DEFAULT_SHELL_TIMEOUT_S: Final = 120.0
MAX_SHELL_TIMEOUT_S: Final = 600.0
MAX_COMMAND_BYTES: Final = 128 * 2**10
"""Linux's MAX_ARG_STRLEN: the longest single argument (the command, after ``-c``) exec takes."""
DEFAULT_KILL_GRACE_S: Final = 2.0
DEFAULT_DRAIN_S: Final = 1.0

UNTRIGGERED_LIMIT_BYTES: Final = 16 * 2**20
"""With the trigger disabled (-1), output up to this size reaches the model whole; past it
the producer previews anyway, because keeping it whole would make memory unbounded."""
MIN_PREVIEW_CHARS: Final = 200
CLEANUP_S: Final = 5.0
QUICK_COMMAND_S: Final = 0.05
"""A command that ends within this (its output closed and its leader gone; most do) is
followed by the calling task alone: no task relays an abort or supervises the leader. An
abort or the caller's cancellation in that window is acted on when it closes, at the latest,
and so is a leader's exit while background processes keep the pipe open (the drain starts
then). A task started and cancelled per call cost about 0.1 ms of a 2 ms ``true``."""

_ARG_NAMES: Final = ("command", "cwd", "timeout", "description")


# -- the run ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Invocation:
    command: str
    cwd: Path
    timeout_s: float


def _check_int(option: str, value: object, *, minimum: int, allow_disabled: bool = False) -> int:
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and (value >= minimum or (allow_disabled and value == -1))
    ):
        return value
    disabled = " or -1 to disable" if allow_disabled else ""
    raise ConfigError(f"{option} must be an int >= {minimum}{disabled}, got {value!r}")


def _check_seconds(option: str, value: object, *, allow_zero: bool = False) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if math.isfinite(seconds) and (seconds > 0 or (allow_zero and seconds == 0)):
            return seconds
    bound = ">= 0" if allow_zero else "> 0"
    raise ConfigError(f"{option} must be a finite number of seconds {bound}, got {value!r}")


class ShellProducer:
    """Runs ``run_shell_command`` calls with ``bash -c`` (see the module docstring).

    Args:
        output_trigger_chars: output over this many characters is previewed and saved to
            one artifact (default 30,000); -1 disables the preview for output up to
            ``UNTRIGGERED_LIMIT_BYTES`` (16 MiB), past which memory would be unbounded.
        preview_chars: the size of the model preview over the trigger (default 4,000).
        display_window_bytes: the size of the user display window over the trigger
            (default 64 KiB).
        default_timeout_s: the timeout of a call that gives none (default 120 s).
        max_timeout_s: the largest timeout a call may ask for (default 600 s).
        kill_grace_s: how long the process group gets between SIGTERM and SIGKILL
            (default 2 s).
        drain_s: how long output is still read after the command ends, for background
            processes that keep the pipe open (default 1 s).
        env: the commands' complete environment; ``None`` (default) inherits the agent's.
        cwd: where commands run when a call gives no ``cwd``, and what a relative ``cwd``
            resolves against; ``None`` (default) is the agent's working directory.
        shell: the shell program, run as ``<shell> -c <command>`` (default ``"bash"``).
        kill_background: stop processes the command leaves running in its process group
            when the call ends (default ``True``: no call leaves processes behind). With
            ``False`` they outlive the call, but lose the output pipe after the drain.
        policy: the sandbox and environment of every command
            (``toolbatch.producers.open_process_policy``); ``None`` (default) takes the
            runtime's, ``ProducerContext.process_policy`` (the scheduler's), and runs
            unconfined without one. ``env``, when given, replaces the policy's environment.

    Raises:
        ConfigError: an option is out of range; the message names it.
    """

    def __init__(
        self,
        *,
        output_trigger_chars: int = DEFAULT_OUTPUT_TRIGGER_CHARS,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        display_window_bytes: int = DEFAULT_DISPLAY_WINDOW_BYTES,
        default_timeout_s: float = DEFAULT_SHELL_TIMEOUT_S,
        max_timeout_s: float = MAX_SHELL_TIMEOUT_S,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        drain_s: float = DEFAULT_DRAIN_S,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        shell: str = "bash",
        kill_background: bool = True,
        policy: ProcessPolicy | None = None,
    ) -> None:
        self._trigger = _check_int(
            "output_trigger_chars", output_trigger_chars, minimum=0, allow_disabled=True
        )
        self._preview_chars = _check_int("preview_chars", preview_chars, minimum=MIN_PREVIEW_CHARS)
        self._display_window = _check_int(
            "display_window_bytes", display_window_bytes, minimum=MIN_PREVIEW_CHARS
        )
        self._max_timeout_s = _check_seconds("max_timeout_s", max_timeout_s)
        self._default_timeout_s = _check_seconds("default_timeout_s", default_timeout_s)
        if self._default_timeout_s > self._max_timeout_s:
            raise ConfigError(
                f"default_timeout_s must not exceed max_timeout_s ({self._max_timeout_s:g}), "
                f"got {default_timeout_s!r}; lower it or raise max_timeout_s"
            )
        self._kill_grace_s = _check_seconds("kill_grace_s", kill_grace_s, allow_zero=True)
        self._drain_s = _check_seconds("drain_s", drain_s, allow_zero=True)
        self._env = dict(env) if env is not None else None
        self._cwd = Path(cwd) if cwd is not None else None
        if not isinstance(shell, str) or not shell:
            raise ConfigError(f"shell must be a program name or path, got {shell!r}")
        self._shell = shell
        self._kill_background = bool(kill_background)
        if policy is not None and not isinstance(policy, ProcessPolicy):
            raise ConfigError(
                f"policy must be a ProcessPolicy (open_process_policy(...)), got {policy!r}"
            )
        self._policy = policy
        preview_bytes = self._preview_chars * MAX_UTF8_BYTES_PER_CHAR
        if self._trigger >= 0:
            artifact_after = self._trigger
            exact_bytes = self._trigger * MAX_UTF8_BYTES_PER_CHAR
        else:
            artifact_after = exact_bytes = UNTRIGGERED_LIMIT_BYTES
        self._artifact_after_bytes = artifact_after
        self._head_cap = max(
            exact_bytes, self._display_window, preview_bytes, BINARY_SNIFF_BYTES, artifact_after
        )
        self._tail_cap = max(self._display_window, preview_bytes)
        self._results = ResultComposer(
            preview_chars=self._preview_chars,
            display_window=self._display_window,
            kill_grace_s=self._kill_grace_s,
            drain_s=self._drain_s,
            max_timeout_s=self._max_timeout_s,
        )
        self._declaration = self._declare()

    @property
    def declaration(self) -> ToolDeclaration:
        """The ``run_shell_command`` declaration: command, cwd, timeout, description."""
        return self._declaration

    def _declare(self) -> ToolDeclaration:
        # Made once: the scheduler reads it for every call, and validating it costs more
        # than the rest of routing the call.
        return ToolDeclaration(
            name=SHELL_TOOL_NAME,
            description=(
                "Run a bash command (bash -c) and return its combined stdout and stderr, "
                "in the order written, followed by its exit code. stdin is /dev/null. "
                f"Output over {self._trigger_words()} is saved to a file and shown as a "
                "head-and-tail preview with that file's path."
                + (
                    " Processes the command leaves running are stopped when it ends."
                    if self._kill_background
                    else ""
                )
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to run."},
                    "cwd": {
                        "type": "string",
                        "description": "Directory to run in (default: the agent's working "
                        "directory; a relative path resolves against it).",
                    },
                    "timeout": {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "maximum": self._max_timeout_s,
                        "description": f"Seconds before the command is stopped (default "
                        f"{self._default_timeout_s:g}, at most {self._max_timeout_s:g}).",
                    },
                    "description": {
                        "type": "string",
                        "description": "A short note for the user on what the command does.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            needs_permission=True,
        )

    def _trigger_words(self) -> str:
        if self._trigger < 0:
            return human_bytes(UNTRIGGERED_LIMIT_BYTES)
        return f"{self._trigger:,} characters"

    # -- arguments ------------------------------------------------------------------------

    def _parse(self, args: Mapping[str, JsonValue]) -> _Invocation | str:
        """The call's invocation, or a message naming the bad value and the fix."""
        unknown = sorted(set(args) - set(_ARG_NAMES))
        if unknown:
            return (
                f"unknown argument(s) {unknown!r} for {SHELL_TOOL_NAME}; "
                f"the arguments are {', '.join(_ARG_NAMES)}"
            )
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return f"command must be a non-empty string of bash, got {command!r}"
        if "\0" in command:
            return "command contains a NUL byte; remove it (bash cannot run such a string)"
        description = args.get("description")
        if description is not None and not isinstance(description, str):
            return f"description must be a string, got {description!r}"
        base = self._cwd if self._cwd is not None else Path.cwd()
        cwd_arg = args.get("cwd")
        if cwd_arg is None:
            cwd = base
        elif not isinstance(cwd_arg, str) or not cwd_arg or "\0" in cwd_arg:
            return f"cwd must be a directory path string, got {cwd_arg!r}"
        else:
            cwd = base / cwd_arg
        try:
            is_directory = stat.S_ISDIR(os.stat(cwd).st_mode)  # one stat, not two
        except (FileNotFoundError, NotADirectoryError):
            return f"cwd {str(cwd)!r} does not exist; pass an existing directory"
        except OSError as exc:
            return (
                f"cwd {str(cwd)!r} cannot be used ({exc.strerror}); pass a directory you can reach"
            )
        if not is_directory:
            return f"cwd {str(cwd)!r} is not a directory; pass a directory"
        timeout = args.get("timeout")
        if timeout is None:
            timeout_s = self._default_timeout_s
        elif (
            isinstance(timeout, int | float)
            and not isinstance(timeout, bool)
            and math.isfinite(timeout)
            and 0 < timeout <= self._max_timeout_s
        ):
            timeout_s = float(timeout)
        else:
            return (
                f"timeout must be a number of seconds above 0 and at most "
                f"{self._max_timeout_s:g}, got {timeout!r}; leave it out for the default "
                f"{self._default_timeout_s:g}"
            )
        return _Invocation(command=command, cwd=cwd, timeout_s=timeout_s)

    # -- running --------------------------------------------------------------------------

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Run the call's command and return its (possibly previewed) output.

        Bad arguments and a shell that cannot start give a failed result, never an
        exception. An abort (``context.cancelled``) stops the process group and returns the
        partial output with error type ``cancelled``. Cancelling the caller's task does the
        same (shielded, bounded by the kill grace, the drain and ``CLEANUP_S``), stores that
        result in ``context.partial_result``, then lets the cancellation propagate.
        """
        invocation = self._parse(call.args)
        if isinstance(invocation, str):
            return ToolResult.failure(invocation, type="invalid_args")
        policy = self._policy if self._policy is not None else context.process_policy
        refusal = policy.refusal() if policy is not None else None
        if refusal is not None:
            return ToolResult.failure(refusal, type="sandbox_unavailable")
        if context.cancelled.is_set():
            return ToolResult.failure("the call was cancelled before it started", type="cancelled")
        timeout_s = invocation.timeout_s
        if context.timeout_s is not None:
            timeout_s = min(timeout_s, context.timeout_s)
        ending = Ending(timeout_s=timeout_s)
        results: list[ToolResult] = []
        # The command runs shielded, so that the caller's cancellation becomes a stop like
        # an abort (group stopped, output drained, artifact committed) instead of losing
        # the output; the relay turns either into ``stop`` and bounds the shield from then.
        # It starts only for a command still running after QUICK_COMMAND_S (``stop.watch``).
        stop_budget_s = self._kill_grace_s + self._drain_s + CLEANUP_S
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope(
                shield=True, deadline=anyio.current_time() + timeout_s + 2 * stop_budget_s
            ) as work:
                stop = StopSignal(
                    lambda: tg.start_soon(
                        self._relay_stop, context.cancelled, stop, work, stop_budget_s
                    )
                )
                results.append(await self._attempt(invocation, call, context, policy, ending, stop))
            if stop.watching:
                tg.cancel_scope.cancel()
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
        except anyio.get_cancelled_exc_class():
            if results:
                context.partial_result = results[0]
            raise
        if not results:  # the shield's own deadline ended a command that would not stop
            return ToolResult.failure(
                f"command did not stop within {timeout_s + 2 * stop_budget_s:g} s",
                type="timeout",
            )
        return results[0]

    @staticmethod
    async def _relay_stop(
        cancelled: anyio.Event, stop: StopSignal, work: anyio.CancelScope, budget_s: float
    ) -> None:
        """Set ``stop`` on an abort or when this task is cancelled (the caller's cancel)."""
        try:
            # Started late (``stop.watch``), it may start after the caller was cancelled,
            # which asyncio's anyio tells only the tasks waiting then: ask.
            if anyio.current_effective_deadline() != -math.inf:
                await cancelled.wait()
        finally:
            if not stop.is_set():
                stop.set()
                work.deadline = min(work.deadline, anyio.current_time() + budget_s)

    async def _attempt(
        self,
        invocation: _Invocation,
        call: ToolCall,
        context: ProducerContext,
        policy: ProcessPolicy | None,
        ending: Ending,
        stop: StopSignal,
    ) -> ToolResult:
        capture = Capture(
            head_cap=self._head_cap,
            tail_cap=self._tail_cap,
            artifact_after_bytes=self._artifact_after_bytes,
        )
        try:
            kind, saved = await self._execute(
                invocation, call, context, policy, capture, ending, stop
            )
        except OSError as exc:
            if exc.errno == errno.E2BIG:
                size = len(invocation.command.encode("utf-8", "surrogateescape"))
                return ToolResult.failure(
                    f"could not start the command: it is {size:,} bytes and the system "
                    f"refuses it (argument list too long: Linux takes at most "
                    f"{MAX_COMMAND_BYTES:,} bytes in one argument, its environment adds to "
                    f"the total); write long content to a file in smaller steps and run that",
                    type="invalid_args",
                )
            return ToolResult.failure(
                f"could not start {self._shell!r} in {str(invocation.cwd)!r}: {exc}; "
                f"check that the shell is installed and the directory is usable",
                type="execution_failed",
            )
        except SpawnerLost as exc:
            return ToolResult.failure(
                f"could not start the command: {exc}", type="execution_failed"
            )
        except ValueError as exc:
            return ToolResult.failure(
                f"could not start the command: {exc}; remove NUL bytes from the command, "
                f"the environment and cwd",
                type="invalid_args",
            )
        result = self._results.result(kind, capture, saved, ending, policy, invocation.command)
        context.log.debug(
            "shell.finished",
            reason=ending.reason,
            returncode=ending.returncode,
            bytes=capture.total,
            kind=kind,
            artifact=str(saved.path) if saved.path is not None else None,
        )
        return result

    async def _execute(
        self,
        invocation: _Invocation,
        call: ToolCall,
        context: ProducerContext,
        policy: ProcessPolicy | None,
        capture: Capture,
        ending: Ending,
        stop: StopSignal,
    ) -> tuple[Kind, Saved]:
        env: Mapping[str, str] | None = self._env
        if env is None and policy is not None:
            env = policy.environment
        argv = [self._shell, "-c", invocation.command]
        absent = policy.absent_protected() if policy is not None else ()
        read_fd, write_fd = open_pipe()
        try:
            try:
                process = await spawn_shell(argv, invocation.cwd, env, policy, write_fd, absent)
            finally:
                os.close(write_fd)  # the children hold the write end; EOF needs ours closed
            deadline = anyio.current_time() + ending.timeout_s
            settled = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    watched = OutputForwarder.of(context)
                    sink = ArtifactSink(context.store, call.id, SHELL_TOOL_NAME, stack)

                    async def read(window: ReadWindow, last: bool) -> bool:
                        return await pump(
                            read_fd,
                            capture,
                            sink,
                            window,
                            progress=lambda total: self._progress(context, total),
                            log=context.log,
                            output=None if watched is None else watched.feed,
                            last=last,
                        )

                    try:
                        await self._follow(process, read, ending, deadline, stop)
                    finally:
                        if watched is not None:
                            watched.close()
                    if isinstance(process, SpawnedCommand) and process.start_error is not None:
                        raise process.start_error  # told as a start failure, as from Popen
                    settled = True
                    kind = classify(capture, self._trigger)
                    saved = await save(kind, sink, context.store)
                return kind, saved
            finally:
                if settled and process.returncode is not None:
                    await process.aclose()  # the leader has exited: nothing to wait for
                else:
                    with (
                        anyio.CancelScope(shield=True),
                        anyio.move_on_after(self._kill_grace_s + CLEANUP_S),
                    ):
                        if not settled:
                            await stop_group(process, grace_s=self._kill_grace_s)
                        await process.aclose()
                if absent and policy is not None:
                    ending.protected_created = tuple(policy.remove_created(absent))
        finally:
            os.close(read_fd)

    async def _follow(
        self,
        process: anyio.abc.Process,
        read: Callable[[ReadWindow, bool], Awaitable[bool]],
        ending: Ending,
        deadline: float,
        stop: StopSignal,
    ) -> None:
        """Read the output and wait for the leader, the ``deadline`` or a stop.

        Most commands end within QUICK_COMMAND_S: this task reads their output to its end,
        then waits for their leader, alone. One still running then gets the stop relay
        (``stop.watch``) and a second task that supervises the leader while this one reads
        on: the timeout, an abort, and a bounded drain of a pipe that background processes
        keep open all need both at once.
        """
        quick = min(deadline, anyio.current_time() + QUICK_COMMAND_S)
        drained = await read(ReadWindow(deadline=quick), False)  # more may follow
        if drained and await exited_by(process, quick):
            await self._settle(process, ending)
            return
        stop.watch()
        window = ReadWindow()
        pump_done = anyio.Event()
        if drained:
            pump_done.set()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._supervise, process, ending, deadline, window, pump_done, stop)
            if not drained:
                try:
                    await read(window, True)
                finally:
                    pump_done.set()

    async def _supervise(
        self,
        process: anyio.abc.Process,
        ending: Ending,
        deadline: float,
        window: ReadWindow,
        pump_done: anyio.Event,
        stop: StopSignal,
    ) -> None:
        ending.reason = await wait_leader(process, deadline=deadline, stop=stop)
        if ending.reason != "exited":
            ending.stop = await stop_group(process, grace_s=self._kill_grace_s)
        # The leader is gone; anything still holding the pipe gets a bounded drain.
        if not pump_done.is_set():
            with anyio.move_on_after(self._drain_s):
                await pump_done.wait()
        ending.pipe_held = not pump_done.is_set()
        await self._settle(process, ending)
        window.close_at(anyio.current_time())

    async def _settle(self, process: anyio.abc.Process, ending: Ending) -> None:
        """Stop what an exited command left running (``kill_background``); take its status."""
        if ending.reason == "exited" and self._kill_background and await command_alive(process):
            left = await stop_group(process, grace_s=self._kill_grace_s)
            ending.background_stopped = left.terminated or left.killed
        ending.returncode = process.returncode
        if isinstance(process, SpawnedCommand):
            ending.lost = process.lost

    @staticmethod
    def _progress(context: ProducerContext, total: int) -> None:
        try:
            context.progress(f"{human_bytes(total)} of output so far")
        except Exception as exc:  # a broken progress callback must not break the call
            context.log.debug("shell.progress_failed", error=str(exc))
