"""The shell producer: ``run_shell_command``, with streamed capture and bounded memory.

How output is captured
    The command runs as ``bash -c <command>`` in a new session (its own process group),
    with stdin from /dev/null. stdout and stderr are the *same* pipe (``stderr=STDOUT``), so
    the output is merged in the exact order the command wrote it, as a terminal would show
    it. The price is that the model cannot tell the two streams apart; keeping them apart
    would lose their relative order, which matters more when reading a failing build.

Memory
    Only the first bytes (enough to decide the trigger exactly, about 4 bytes per trigger
    character) and a rolling tail are kept in memory. Once the output passes the trigger,
    all of it, from the first byte, streams into one artifact through the store's streaming
    writer, fed by a writer task over a bounded queue so disk writes overlap pipe reads. A
    1 GiB output costs the same memory as a 1 MiB one.

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

What the user gets (``ToolResult.display``)
    A string: the whole output up to the trigger; past it, a head-and-tail window of about
    ``display_window_bytes`` with the artifact path; a status line when there is no output;
    the exit information last.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import re
import signal
import subprocess
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypeAlias

import anyio
import anyio.abc
import anyio.lowlevel
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import JsonValue

from toolbatch._process import (
    GroupStop,
    group_alive,
    open_group_process,
    open_pipe,
    stop_group,
)
from toolbatch._wire import ToolCall, ToolFailure, ToolResult
from toolbatch.artifacts import ArtifactStore, ArtifactStream
from toolbatch.errors import ArtifactWriteError, ConfigError
from toolbatch.producers._base import ProducerContext, ToolDeclaration

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
DEFAULT_KILL_GRACE_S: Final = 2.0
DEFAULT_DRAIN_S: Final = 1.0

UNTRIGGERED_LIMIT_BYTES: Final = 16 * 2**20
"""With the trigger disabled (-1), output up to this size reaches the model whole; past it
the producer previews anyway, because keeping it whole would make memory unbounded."""
READ_CHUNK_BYTES: Final = 1 * 2**20
WRITE_QUEUE_CHUNKS: Final = 16
"""Chunks (each at most ``READ_CHUNK_BYTES``) queued for the artifact writer task."""
YIELD_EVERY_BYTES: Final = 4 * 2**20
"""Bytes read without an await before the reader yields to the event loop anyway."""
BINARY_SNIFF_BYTES: Final = 8_000
"""A NUL byte among the first this-many bytes marks the output as binary (as git does)."""
SMALL_CHUNK_BYTES: Final = 4096
PROGRESS_INTERVAL_S: Final = 1.0
MIN_PREVIEW_CHARS: Final = 200
PREVIEW_HEAD_FRACTION: Final = 0.2
MARKER_RESERVE_CHARS: Final = 48
"""Room kept in ``preview_chars`` for the omission marker line."""
MAX_UTF8_BYTES_PER_CHAR: Final = 4
CLEANUP_S: Final = 5.0

_ARG_NAMES: Final = ("command", "cwd", "timeout", "description")
_ESCAPED_BYTE: Final = re.compile("[\udc80-\udcff]")
_REPLACEMENT: Final = "\ufffd"

Reason: TypeAlias = Literal["exited", "timeout", "cancelled"]
Kind: TypeAlias = Literal["whole", "preview", "binary"]


# -- decoding ---------------------------------------------------------------------------


def _replace_escapes(text: str) -> tuple[str, int]:
    """``text`` with each surrogate-escaped invalid byte made U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return _ESCAPED_BYTE.subn(_REPLACEMENT, text)


def _decode_prefix(data: bytes, max_chars: int) -> tuple[str, int]:
    """At most ``max_chars`` from the start of ``data`` (a prefix of the output).

    Returns the text (invalid bytes still surrogate-escaped) and how many bytes it covers.
    A character cut by the end of ``data`` is left out; a line boundary in the last quarter
    is preferred as the cut.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    text = decoder.decode(data[: max_chars * MAX_UTF8_BYTES_PER_CHAR], final=False)[:max_chars]
    newline = text.rfind("\n")
    if newline >= 0 and newline >= len(text) * 3 // 4:
        text = text[: newline + 1]
    return text, len(text.encode("utf-8", "surrogateescape"))


def _decode_suffix(data: bytes, max_chars: int, *, cut: bool) -> tuple[str, int]:
    """At most ``max_chars`` from the end of ``data`` (a suffix of the output).

    ``cut`` says that ``data`` does not start at the output's first byte, so a character
    split by its start is skipped. A line boundary in the first quarter is preferred.
    """
    window = max_chars * MAX_UTF8_BYTES_PER_CHAR
    raw = data[-window:] if window < len(data) else data
    skip = 0
    if cut or len(raw) < len(data):
        while skip < min(3, len(raw)) and 0x80 <= raw[skip] <= 0xBF:
            skip += 1
    text = raw[skip:].decode("utf-8", "surrogateescape")[-max_chars:]
    newline = text.find("\n")
    if 0 <= newline < len(text) // 4:
        text = text[newline + 1 :]
    return text, len(text.encode("utf-8", "surrogateescape"))


def _head_and_tail(
    head: bytes, tail: bytes, total: int, *, head_chars: int, tail_chars: int
) -> tuple[str, int]:
    """A head, an omission marker and a tail of an output of ``total`` bytes.

    ``head`` is a prefix of the output and ``tail`` a suffix (they may be the same complete
    output). Returns the text and the number of invalid bytes shown as U+FFFD.
    """
    head_text, head_bytes = _decode_prefix(head, head_chars)
    tail_text, tail_bytes = _decode_suffix(tail, tail_chars, cut=len(tail) < total)
    omitted = total - head_bytes - tail_bytes
    if omitted <= 0 and len(head) == total:
        return _replace_escapes(head.decode("utf-8", "surrogateescape"))
    newline = "" if not head_text or head_text.endswith("\n") else "\n"
    marker = f"{newline}... [{max(omitted, 0):,} bytes omitted] ...\n"
    return _replace_escapes(head_text + marker + tail_text)


# -- capture ----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Capture:
    """The bounded in-memory view of a command's output: first bytes, rolling tail, count.

    The tail keeps references to the last chunks read (no copying on the hot path; small
    reads are merged); it holds at most ``tail_cap`` bytes plus one chunk.
    """

    head_cap: int
    tail_cap: int
    artifact_after_bytes: int
    """Past this many bytes the output might be over the trigger: stream it to an artifact."""
    head: bytearray = field(default_factory=bytearray)
    total: int = 0
    binary: bool = False
    _tail: deque[bytes] = field(default_factory=deque)
    _tail_bytes: int = 0

    def feed(self, chunk: bytes) -> None:
        total = self.total
        if total < BINARY_SNIFF_BYTES and chunk.find(b"\0", 0, BINARY_SNIFF_BYTES - total) >= 0:
            self.binary = True
        if total < self.head_cap:
            self.head += chunk[: self.head_cap - total]
        tail = self._tail
        if len(chunk) < SMALL_CHUNK_BYTES and tail and len(tail[-1]) < SMALL_CHUNK_BYTES:
            tail[-1] += chunk  # a trickle of tiny reads must not become a long deque
        else:
            tail.append(chunk)
        self._tail_bytes += len(chunk)
        while self._tail_bytes - len(tail[0]) >= self.tail_cap:
            self._tail_bytes -= len(tail.popleft())
        self.total = total + len(chunk)

    def tail(self) -> bytes:
        """The last ``tail_cap`` bytes (fewer if the output is shorter)."""
        return b"".join(self._tail)[-self.tail_cap :]

    def wants_artifact(self, *, eof: bool) -> bool:
        """Whether the output must go to an artifact (its suffix is known once sniffed)."""
        if self.binary:
            return True
        sniffed = eof or self.total >= BINARY_SNIFF_BYTES
        return sniffed and self.total > self.artifact_after_bytes

    @property
    def suffix(self) -> str:
        return ".bin" if self.binary else ".txt"

    def whole(self) -> bytes | None:
        """The complete output, if it all fitted in the head."""
        return bytes(self.head) if self.total <= self.head_cap else None


# -- the artifact side ------------------------------------------------------------------


async def _write_chunks(stream: ArtifactStream, chunks: MemoryObjectReceiveStream[bytes]) -> None:
    # Chunks go through as read: under load a pipe read returns the full 1 MiB, which the
    # stream flushes without copying; joining larger blocks here measured slower.
    async with chunks:
        async for chunk in chunks:
            await stream.write(chunk)


@dataclass(slots=True, eq=False)
class _ArtifactSink:
    """Opens the artifact stream on demand and feeds it through a bounded queue."""

    store: ArtifactStore | None
    call_id: str
    stack: contextlib.AsyncExitStack
    task_group: anyio.abc.TaskGroup
    stream: ArtifactStream | None = None
    _send: MemoryObjectSendStream[bytes] | None = None

    async def open(self, suffix: str, first: bytes) -> None:
        assert self.store is not None
        self.stream = await self.stack.enter_async_context(
            self.store.open_stream(self.call_id, SHELL_TOOL_NAME, suffix=suffix)
        )
        send, receive = anyio.create_memory_object_stream[bytes](WRITE_QUEUE_CHUNKS)
        self._send = send
        self.task_group.start_soon(_write_chunks, self.stream, receive)
        if first:
            await send.send(first)

    async def write(self, chunk: bytes) -> bool:
        """Queue ``chunk``; ``False`` (and no await) once the stream keeps nothing more."""
        stream = self.stream
        if self._send is None or stream is None:
            return False
        if stream.error is not None or stream.dropped_by is not None:
            return False  # a cap or a write error: the rest is only counted
        await self._send.send(chunk)
        return True

    def close(self) -> None:
        if self._send is not None:
            self._send.close()


@dataclass(slots=True)
class _Saved:
    """Where the complete output went, if anywhere."""

    path: Path | None = None
    kept_bytes: int = 0
    cap: Literal["file", "total"] | None = None
    problem: str | None = None
    """Why there is no file: no store, or the write failed."""


# -- the run ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Invocation:
    command: str
    cwd: Path
    timeout_s: float


@dataclass(slots=True)
class _Ending:
    timeout_s: float
    reason: Reason = "exited"
    returncode: int | None = None
    stop: GroupStop | None = None
    pipe_held: bool = False
    background_stopped: bool = False


@dataclass(slots=True, eq=False)
class _ReadWindow:
    """Lets the supervisor end the reader's waits on the pipe (the bounded drain)."""

    deadline: float = math.inf
    _scope: anyio.CancelScope | None = None

    def close_at(self, deadline: float) -> None:
        self.deadline = min(self.deadline, deadline)
        if self._scope is not None:
            self._scope.deadline = self.deadline

    async def wait_readable(self, fd: int) -> bool:
        """Wait for data or EOF on ``fd``; ``False`` when the window closed first."""
        with anyio.CancelScope(deadline=self.deadline) as scope:
            self._scope = scope
            try:
                await anyio.wait_readable(fd)
            finally:
                self._scope = None
        return not scope.cancelled_caught


async def _wait_leader(
    process: anyio.abc.Process, *, timeout_s: float, abort: anyio.Event
) -> Reason:
    """Wait for the leader to exit, the timeout, or ``abort``, whichever comes first."""
    reason: Reason = "exited"
    async with anyio.create_task_group() as tg:

        async def watch_abort() -> None:
            nonlocal reason
            await abort.wait()
            reason = "cancelled"
            tg.cancel_scope.cancel()

        tg.start_soon(watch_abort)
        with anyio.move_on_after(timeout_s) as scope:
            await process.wait()
        if scope.cancelled_caught:
            reason = "timeout"
        tg.cancel_scope.cancel()
    return reason


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return f"signal {number}"


def _human_bytes(count: int) -> str:
    if count < 2**10:
        return f"{count} B"
    if count < 2**20:
        return f"{count / 2**10:.1f} KiB"
    if count < 2**30:
        return f"{count / 2**20:.1f} MiB"
    return f"{count / 2**30:.2f} GiB"


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

    @property
    def declaration(self) -> ToolDeclaration:
        """The ``run_shell_command`` declaration: command, cwd, timeout, description."""
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
            return _human_bytes(UNTRIGGERED_LIMIT_BYTES)
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
        if not cwd.exists():
            return f"cwd {str(cwd)!r} does not exist; pass an existing directory"
        if not cwd.is_dir():
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
        exception. Cancelling the caller's task stops the process group (shielded), then
        the cancellation propagates.
        """
        invocation = self._parse(call.args)
        if isinstance(invocation, str):
            return ToolResult.failure(invocation, type="invalid_args")
        if context.cancelled.is_set():
            return ToolResult.failure("the call was cancelled before it started", type="cancelled")
        timeout_s = invocation.timeout_s
        if context.timeout_s is not None:
            timeout_s = min(timeout_s, context.timeout_s)
        capture = _Capture(
            head_cap=self._head_cap,
            tail_cap=self._tail_cap,
            artifact_after_bytes=self._artifact_after_bytes,
        )
        ending = _Ending(timeout_s=timeout_s)
        try:
            kind, saved = await self._execute(invocation, call, context, capture, ending)
        except OSError as exc:
            return ToolResult.failure(
                f"could not start {self._shell!r} in {str(invocation.cwd)!r}: {exc}; "
                f"check that the shell is installed and the directory is usable",
                type="execution_failed",
            )
        except ValueError as exc:
            return ToolResult.failure(
                f"could not start the command: {exc}; remove NUL bytes from the command, "
                f"the environment and cwd",
                type="invalid_args",
            )
        result = self._result(kind, capture, saved, ending)
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
        capture: _Capture,
        ending: _Ending,
    ) -> tuple[Kind, _Saved]:
        read_fd, write_fd = open_pipe()
        try:
            try:
                process = await open_group_process(
                    [self._shell, "-c", invocation.command],
                    stdout=write_fd,
                    stderr=subprocess.STDOUT,
                    cwd=invocation.cwd,
                    env=self._env,
                )
            finally:
                os.close(write_fd)  # the children hold the write end; EOF needs ours closed
            settled = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    window = _ReadWindow()
                    pump_done = anyio.Event()
                    async with anyio.create_task_group() as tg:
                        sink = _ArtifactSink(context.store, call.id, stack, tg)
                        tg.start_soon(
                            self._supervise, process, ending, window, pump_done, context.cancelled
                        )
                        try:
                            await self._pump(read_fd, capture, sink, window, context)
                        finally:
                            pump_done.set()
                            sink.close()
                    settled = True
                    kind = self._kind(capture)
                    saved = await self._save(kind, sink, context.store)
                return kind, saved
            finally:
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(self._kill_grace_s + CLEANUP_S),
                ):
                    if not settled:
                        await stop_group(process, grace_s=self._kill_grace_s)
                    await process.aclose()
        finally:
            os.close(read_fd)

    async def _supervise(
        self,
        process: anyio.abc.Process,
        ending: _Ending,
        window: _ReadWindow,
        pump_done: anyio.Event,
        abort: anyio.Event,
    ) -> None:
        ending.reason = await _wait_leader(process, timeout_s=ending.timeout_s, abort=abort)
        if ending.reason != "exited":
            ending.stop = await stop_group(process, grace_s=self._kill_grace_s)
        # The leader is gone; anything still holding the pipe gets a bounded drain.
        with anyio.move_on_after(self._drain_s):
            await pump_done.wait()
        ending.pipe_held = not pump_done.is_set()
        if ending.reason == "exited" and self._kill_background and await group_alive(process.pid):
            stop = await stop_group(process, grace_s=self._kill_grace_s)
            ending.background_stopped = stop.terminated or stop.killed
        ending.returncode = process.returncode
        window.close_at(anyio.current_time())

    async def _pump(
        self,
        fd: int,
        capture: _Capture,
        sink: _ArtifactSink,
        window: _ReadWindow,
        context: ProducerContext,
    ) -> None:
        """Read the pipe to EOF (or until the window closes) into memory and the artifact."""
        storing = sink.store is not None
        read = os.read
        current_time = anyio.current_time
        unyielded = 0
        next_progress = current_time() + PROGRESS_INTERVAL_S
        while True:
            try:
                chunk = read(fd, READ_CHUNK_BYTES)
            except BlockingIOError:
                if not await window.wait_readable(fd):
                    break
                unyielded = 0
                continue
            except OSError as exc:
                context.log.warning("shell.read_failed", error=str(exc))
                break
            if not chunk:
                break
            before = capture.total
            capture.feed(chunk)
            if sink.stream is not None:
                if await sink.write(chunk):
                    unyielded = 0
            elif storing and capture.wants_artifact(eof=False):
                # Everything before this chunk is still in the head (it opens by then).
                await sink.open(capture.suffix, bytes(capture.head[:before]) + chunk)
                unyielded = 0
            unyielded += len(chunk)
            if unyielded >= YIELD_EVERY_BYTES:
                await anyio.lowlevel.checkpoint()
                unyielded = 0
            now = current_time()
            if now >= next_progress:
                next_progress = now + PROGRESS_INTERVAL_S
                self._progress(context, capture.total)
            if now >= window.deadline:
                break  # something keeps writing after the drain ended
        if sink.stream is None and storing and capture.wants_artifact(eof=True):
            await sink.open(capture.suffix, bytes(capture.head))

    @staticmethod
    def _progress(context: ProducerContext, total: int) -> None:
        try:
            context.progress(f"{_human_bytes(total)} of output so far")
        except Exception as exc:  # a broken progress callback must not break the call
            context.log.debug("shell.progress_failed", error=str(exc))

    # -- the result -----------------------------------------------------------------------

    def _kind(self, capture: _Capture) -> Kind:
        if capture.binary:
            return "binary"
        whole = capture.whole()
        if whole is None:
            return "preview"
        if self._trigger < 0:
            return "whole"
        if len(whole) <= self._trigger:
            return "whole"
        # Between the trigger in bytes and in characters only decoding can tell.
        chars = len(whole.decode("utf-8", "surrogateescape"))
        return "preview" if chars > self._trigger else "whole"

    @staticmethod
    async def _save(kind: Kind, sink: _ArtifactSink, store: ArtifactStore | None) -> _Saved:
        if kind == "whole":
            return _Saved()  # leaving the stack discards a stream opened just in case
        stream = sink.stream
        if store is None:
            return _Saved(problem="no artifact store is configured")
        if stream is None:
            return _Saved(problem="the output stream was not opened")
        try:
            path = await stream.commit()
        except ArtifactWriteError as exc:
            return _Saved(problem=f"saving it failed: {exc}")
        return _Saved(path=path, kept_bytes=stream.bytes_kept, cap=stream.dropped_by)

    def _result(self, kind: Kind, capture: _Capture, saved: _Saved, ending: _Ending) -> ToolResult:
        exit_line = self._exit_line(ending)
        notes = self._ending_notes(ending)
        total = capture.total
        persisted: tuple[Path, ...] | None
        if kind == "whole":
            whole = capture.whole()
            assert whole is not None
            text, replaced = _replace_escapes(whole.decode("utf-8", "surrogateescape"))
            if replaced:
                notes.insert(0, f"[{replaced:,} invalid UTF-8 bytes were replaced with U+FFFD]")
            content = _compose(text if text else "(no output)", notes, exit_line)
            return self._finish(content, content, ending, persisted_output_files=None)
        persisted = (saved.path,) if saved.path is not None else ()
        unsaved = total - saved.kept_bytes if saved.path is not None else 0
        if kind == "binary":
            content = _compose(
                f"[binary output: {total:,} bytes, not shown; {_where(saved, unsaved)}]",
                notes,
                exit_line,
            )
            return self._finish(content, content, ending, persisted_output_files=persisted)
        whole = capture.whole()
        head = whole if whole is not None else bytes(capture.head)
        tail = whole if whole is not None else capture.tail()
        body = max(self._preview_chars - MARKER_RESERVE_CHARS, 2)
        head_chars = int(body * PREVIEW_HEAD_FRACTION)
        preview, replaced = _head_and_tail(
            head, tail, total, head_chars=head_chars, tail_chars=body - head_chars
        )
        header = f"Output too long ({total:,} bytes); {_where(saved, unsaved)}\n"
        if saved.path is not None:
            header += "Read that file with shell commands (grep, sed -n, tail) for the rest. "
        header += "The start and end of the output:"
        if replaced:
            notes.insert(0, f"[{replaced:,} invalid UTF-8 bytes shown above were replaced]")
        content = _compose(f"{header}\n{preview}", notes, exit_line)
        window_head = self._display_window // 4
        shown, _ = _head_and_tail(
            head[:window_head],
            tail[-(self._display_window - window_head) :],
            total,
            head_chars=window_head,
            tail_chars=self._display_window - window_head,
        )
        footer = f"Output too long ({total:,} bytes); {_where(saved, unsaved)}"
        display = _compose(shown, [footer, *notes], exit_line)
        return self._finish(content, display, ending, persisted_output_files=persisted)

    def _finish(
        self,
        content: str,
        display: str,
        ending: _Ending,
        *,
        persisted_output_files: tuple[Path, ...] | None,
    ) -> ToolResult:
        error = None
        if ending.reason == "timeout":
            error = ToolFailure(
                type="timeout",
                message=(
                    f"command timed out after {ending.timeout_s:g} s and was stopped; its "
                    f"partial output is in 'output'. Pass a larger 'timeout' (at most "
                    f"{self._max_timeout_s:g} s) or make the command finish sooner"
                ),
            )
        elif ending.reason == "cancelled":
            error = ToolFailure(
                type="cancelled",
                message="command was cancelled and stopped; its partial output is in 'output'",
            )
        return ToolResult(
            content=content,
            display=display,
            error=error,
            persisted_output_files=persisted_output_files,
        )

    def _exit_line(self, ending: _Ending) -> str:
        if ending.reason == "timeout":
            return f"[timed out after {ending.timeout_s:g} s; {self._stopped(ending.stop)}]"
        if ending.reason == "cancelled":
            return f"[cancelled; {self._stopped(ending.stop)}]"
        code = ending.returncode
        if code is None:
            return "[exit status unknown]"
        if code < 0:
            return f"[killed by signal {_signal_name(-code)}]"
        if 128 < code <= 128 + 64:
            try:
                name = signal.Signals(code - 128).name
            except ValueError:
                pass
            else:
                return f"[exit code: {code} (128+{code - 128}: a command was killed by {name})]"
        return f"[exit code: {code}]"

    def _stopped(self, stop: GroupStop | None) -> str:
        if stop is None or not (stop.terminated or stop.killed):
            return "the command had already ended"
        if stop.terminated and stop.killed:
            return f"its processes were sent SIGTERM, then SIGKILL after {self._kill_grace_s:g} s"
        if stop.killed:
            return "its processes were sent SIGKILL"
        return "its processes were stopped with SIGTERM"

    def _ending_notes(self, ending: _Ending) -> list[str]:
        notes = []
        if ending.pipe_held:
            notes.append(
                f"[output was read for {self._drain_s:g} s after the command ended, then "
                f"dropped: a background process kept the output pipe open]"
            )
        if ending.background_stopped:
            notes.append("[processes the command left running in the background were stopped]")
        return notes


def _where(saved: _Saved, unsaved: int) -> str:
    if saved.path is None:
        return f"it was not saved to a file ({saved.problem})"
    if unsaved > 0:
        which = "per-file" if saved.cap == "file" else "total"
        return (
            f"its first {saved.kept_bytes:,} bytes were saved to: {saved.path} "
            f"({unsaved:,} bytes were not saved: the artifact store's {which} cap)"
        )
    return f"the full output was saved to: {saved.path}"


def _compose(body: str, notes: list[str], exit_line: str) -> str:
    """``body``, then ``notes``, then ``exit_line`` last, one per line."""
    pieces = [body]
    if body and not body.endswith("\n"):
        pieces.append("\n")
    pieces.extend(f"{note}\n" for note in notes)
    pieces.append(exit_line)
    return "".join(pieces)
