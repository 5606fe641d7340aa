"""A linear-time stdio transport for the SDK's ``ClientSession``.

The SDK's ``stdio_client`` rebuilds its line buffer with ``(buffer + chunk).split("\\n")``
for every 64 KiB chunk, so one 50 MB result costs about 48 s. Here chunks of a partial line
are kept in a list and joined once when its newline arrives, and each line is parsed from
bytes by pydantic-core: linear in the message size. A request is written to the server's
stdin (a non-blocking pipe of ours) in the caller's own turn of the event loop, not by a
task woken for it; only what the pipe cannot take at once waits, in order, for the stdin pump.

It also survives what the SDK does not:

* a lone surrogate in either direction (a TypeScript server legally sends ``"\\ud83d"``;
  a Python caller may pass one in arguments): replaced by U+FFFD instead of dropping the
  message, which would leave its call hanging;
* a response whose JSON-RPC envelope is invalid: turned into an error for that request id;
* a message over ``max_message_bytes``: the connection is closed instead of buffering
  without bound.

The server runs in its own session (process group) with only ``DEFAULT_INHERITED_ENV_VARS``
plus the entry's ``env``; its stderr goes to the ``toolbatch.mcp`` log, never to tool output.
Leaving the context closes stdin, waits briefly, then terminates the whole process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.abc
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, from_json

from toolbatch._core import MAX_JSON_DEPTH, json_too_deep
from toolbatch.producers.mcp._config import StdioServerConfig
from toolbatch.producers.mcp._limits import refuse_deep_message
from toolbatch.producers.mcp._scrub import scrub_surrogates
from toolbatch.sandbox import DEFAULT_INHERITED_ENV_VARS, minimal_environment

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_STDIN_CLOSE_GRACE_S",
    "StdioTransport",
    "decode_message",
    "encode_message",
    "open_stdio_transport",
    "server_environment",
    "shutdown_s",
]

log = structlog.get_logger("toolbatch.mcp")


DEFAULT_MAX_MESSAGE_BYTES: Final = 256 * 2**20
"""A server message larger than this closes the connection (its call gets an error)."""
READ_CHUNK_BYTES: Final = 1 * 2**20
LARGE_MESSAGE_BYTES: Final = 16 * 2**20
"""Messages longer than this are parsed by the stdlib on their text, to hold 2x not 3x."""
STDERR_LINE_CHARS: Final = 2_000
STDERR_PENDING_BYTES: Final = 64 * 2**10
STDERR_TAIL_LINES: Final = 20
DEFAULT_STDIN_CLOSE_GRACE_S: Final = 2.0
"""How long a started server may take to exit by itself once its stdin is closed
(``McpServers(stdin_close_grace_s=...)``)."""
TERM_GRACE_S: Final = 2.0
"""How long the process group has between SIGTERM and SIGKILL."""
KILL_WAIT_S: Final = 2.0


def shutdown_s(stdin_close_grace_s: float) -> float:
    """The longest a stdio server's stop can take with this stdin-close grace."""
    return stdin_close_grace_s + TERM_GRACE_S + KILL_WAIT_S + 1.0


_PIPE_ENDED: Final = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError)


class QueueToStdin:
    """The session's writer to the server's stdin (the SDK's write stream).

    A send writes its message to the pipe at once when nothing is waiting to go before it:
    the server has the request in the caller's own turn, with no task woken to write it
    (a pump task would write it two turns of the event loop later). What the pipe cannot
    take now waits, in order, for the stdin pump (:meth:`pump`), which writes it as the
    server reads. Unbounded on purpose: a send never waits, so a courtesy cancel after a
    timeout never blocks on a server that stopped reading; it holds at most the calls in
    flight.

    Args:
        fd: our end of the server's stdin pipe, non-blocking; closed by :meth:`release`.
        on_broken: called once when a write fails (the server closed its stdin or exited).
    """

    __slots__ = ("_backlog", "_broken", "_closed", "_fd", "_new_event", "_on_broken", "_wakeup")

    def __init__(self, fd: int, on_broken: Callable[[OSError], None]) -> None:
        self._fd: int | None = fd
        self._on_broken = on_broken
        self._backlog: deque[bytes | memoryview] = deque()
        self._wakeup: anyio.Event | None = None
        self._new_event: Callable[[], anyio.Event] | None = None
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write ``item`` to the server's stdin, or queue what the pipe cannot take now.

        Raises:
            anyio.ClosedResourceError: the transport is closed.
            anyio.BrokenResourceError: a write failed before (the server stopped reading).
        """
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken or self._fd is None:
            raise anyio.BrokenResourceError
        data: bytes | memoryview = encode_message(item.message)
        if not self._backlog:
            written = self._write(data)
            if written is None or written == len(data):
                return  # written whole, or the write failed (and ``on_broken`` was told)
            if written:
                data = memoryview(data)[written:]
        self._backlog.append(data)
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def close(self) -> None:
        """No more sends (the pipe stays open until :meth:`release`)."""
        self._closed = True
        self._wake()

    async def aclose(self) -> None:
        """``close()``."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def _write(self, data: bytes | memoryview) -> int | None:
        """Write what the pipe takes now: the bytes written, or ``None`` when it failed."""
        fd = self._fd
        if fd is None:
            return None
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:  # EPIPE: the server closed its stdin or exited
            self._fail(exc)
            return None

    def _fail(self, exc: OSError) -> None:
        if not self._broken:
            self._broken = True
            self._backlog.clear()
            self._wake()
            self._on_broken(exc)

    async def pump(self) -> None:
        """Write what sends queued, in order, as the pipe drains; return once the queue is
        closed, the pipe released or a write failed."""
        backlog = self._backlog
        while True:
            while not backlog:
                if self._closed or self._broken or self._fd is None:
                    return
                new_event = self._new_event
                if new_event is None:  # the running backend's class, found once
                    new_event = self._new_event = type(anyio.Event())
                self._wakeup = wakeup = new_event()
                await wakeup.wait()
            fd = self._fd
            if fd is None or self._broken:
                return
            data = backlog[0]
            written = self._write(data)
            if written is None:
                return
            if written == len(data):
                backlog.popleft()
            elif written:
                backlog[0] = memoryview(data)[written:]
            else:
                try:
                    await anyio.wait_writable(fd)
                except anyio.ClosedResourceError:
                    return  # released while waiting

    def release(self) -> None:
        """Close our end of the pipe (the server reads end of file); nothing more is written."""
        self._closed = True
        self._backlog.clear()
        fd, self._fd = self._fd, None
        self._wake()
        if fd is not None:
            anyio.notify_closing(fd)  # a pump waiting for the pipe wakes, never writes
            os.close(fd)


def server_environment(
    extra: Mapping[str, str], *, inherited: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a stdio server: the inherited defaults, then ``extra`` over them.

    Args:
        extra: the entry's ``env``.
        inherited: where the defaults are read from (default: ``os.environ``).
    """
    return minimal_environment(extra, inherited=inherited)


def encode_message(message: JSONRPCMessage) -> bytes:
    """One JSON-RPC line, UTF-8; lone surrogates become U+FFFD instead of failing."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        data = scrub_surrogates(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def decode_message(line: bytes | bytearray) -> SessionMessage | Exception:
    """Parse one JSON-RPC line; an exception is returned (as the SDK expects), not raised.

    The fast path is pydantic-core on the raw bytes. If that fails, the line is parsed with
    ``json.loads`` (which accepts lone-surrogate escapes and, after replacement decoding,
    broken UTF-8) and its lone surrogates replaced. A response whose envelope is still
    invalid becomes a JSON-RPC error for its id, so its caller is answered.
    """
    return _decode_taken([line])


def _decode_taken(holder: list[bytes | bytearray]) -> SessionMessage | Exception:
    """``decode_message`` of the line in ``holder``, which it takes (empties): on the fast
    path the raw line is released as soon as it is parsed, so a 200 MB result is not held
    as its bytes and as its text at once."""
    line = holder.pop()
    size = len(line)
    first_error: Exception | None = None
    data: Any = None
    if size > LARGE_MESSAGE_BYTES and json_too_deep(line):
        log.warning("mcp.message_too_deep", bytes=size, limit=MAX_JSON_DEPTH)
        return refuse_deep_message(bytes(line))
    if size > LARGE_MESSAGE_BYTES:
        # The stdlib parser on the decoded text: the bytes go before it parses, and it
        # holds the text and its result (2x the message), where pydantic-core holds the
        # bytes, its unescaped copy and the result (3x; 647 against 402 MB for 200 MB).
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            first_error = exc
        else:
            line = b""
            try:
                data = json.loads(text)
            except ValueError as exc:
                first_error = exc
                line = text.encode("utf-8")
            else:
                data = scrub_surrogates(data)
            del text
    else:
        try:
            # Parsing to Python first is 5x faster than validate_json on a large result:
            # the union of message types makes validate_json copy long strings for each
            # candidate.
            data = from_json(line)
        except ValueError as exc:
            first_error = exc
    if first_error is None:
        del line  # parsed: the text lives on in ``data``, the bytes are not needed
    else:
        raw = bytes(line) if isinstance(line, bytearray) else line
        del line
        if json_too_deep(raw):  # json.loads would recurse: refuse it unparsed
            log.warning("mcp.message_too_deep", bytes=len(raw), limit=MAX_JSON_DEPTH)
            return refuse_deep_message(raw)
        try:
            data = json.loads(raw.decode("utf-8", "replace"))
        except ValueError as exc:
            log.warning("mcp.unparseable_message", error=str(exc), bytes=len(raw), head=raw[:200])
            return exc
        # Lone surrogates (which pydantic-core refuses) are replaced; a line pydantic-core
        # parsed has none.
        data = scrub_surrogates(data)
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(data, by_name=False))
    except ValidationError as exc:
        request_id = data.get("id") if isinstance(data, dict) else None
        is_response = isinstance(data, dict) and ("result" in data or "error" in data)
        if is_response and isinstance(request_id, str | int) and not isinstance(request_id, bool):
            log.warning("mcp.invalid_response", id=request_id, error=str(exc))
            return SessionMessage(
                JSONRPCError(
                    jsonrpc="2.0",
                    id=request_id,
                    error=ErrorData(
                        code=INTERNAL_ERROR,
                        message="the server sent an invalid JSON-RPC response: "
                        f"{first_error or exc}",
                    ),
                )
            )
        log.warning("mcp.invalid_message", error=str(exc), bytes=size)
        return exc


@dataclass(slots=True, eq=False)
class StdioTransport:
    """A running stdio server and the stream pair to hand to ``ClientSession``.

    Attributes:
        read_stream: messages from the server (or parse errors, as the SDK expects).
        write_stream: messages to the server.
        process: the server process (the leader of its own process group).
        closed: set once the server's stdout ended or its stdin broke.
        close_reason: why the transport closed, when it was not a plain end of output.
        stderr_tail: the server's last stderr lines, for start-up diagnostics.
        started: the server finished start-up (``initialize`` and ``tools/list``); one
            that never did is killed at once when the transport closes, not given a grace.
        stdin_close_grace_s: how long a started server may take to exit by itself once its
            stdin is closed, before its process group is terminated.
    """

    read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    write_stream: QueueToStdin
    process: anyio.abc.Process
    server: str
    max_message_bytes: int
    on_close: Callable[[], None] | None = None
    closed: anyio.Event = field(default_factory=anyio.Event)
    close_reason: str | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))
    started: bool = False
    stdin_close_grace_s: float = DEFAULT_STDIN_CLOSE_GRACE_S
    _read_send: MemoryObjectSendStream[SessionMessage | Exception] | None = None

    @property
    def returncode(self) -> int | None:
        """The server's exit status once it has exited (negative: killed by that signal)."""
        return self.process.returncode

    def exit_status(self) -> str:
        """The exit in words: ``exit code 3``, ``killed by SIGKILL``, ``still running``."""
        return describe_returncode(self.process.returncode)

    def _mark_closed(self, reason: str | None = None) -> None:
        if reason is not None and self.close_reason is None:
            self.close_reason = reason
        if not self.closed.is_set():
            self.closed.set()
            if self.on_close is not None:
                self.on_close()

    async def _pump_stdout(self) -> None:
        stdout = self.process.stdout
        send = self._read_send
        assert stdout is not None
        assert send is not None
        # A line longer than one read grows in one bytearray: past a few MiB it is one
        # mapping that grows in place, where a list of chunks and their join would leave
        # the chunks' freed heap resident beside the line (a 200 MB message held twice).
        pending = bytearray()
        try:
            async with send:
                while True:
                    try:
                        chunk = await stdout.receive(READ_CHUNK_BYTES)
                    except _PIPE_ENDED:
                        return
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        line: bytes | bytearray
                        if pending:
                            pending += memoryview(chunk)[start:end]
                            line, pending = pending, bytearray()
                        else:
                            line = chunk[start:end]
                        start = end + 1
                        if len(line) > self.max_message_bytes:
                            self._refuse_oversized()
                            return
                        if line and not line.isspace():
                            # Handed over, not kept: decoding releases the bytes once parsed.
                            holder = [line]
                            del line
                            message = _decode_taken(holder)
                            try:
                                # The session waits for it: handed over without the turn
                                # of the loop that ``send`` yields first.
                                send.send_nowait(message)
                            except anyio.WouldBlock:
                                await send.send(message)
                            del message
                    if start < len(chunk):
                        pending += memoryview(chunk)[start:] if start else chunk
                        if len(pending) > self.max_message_bytes:
                            self._refuse_oversized()
                            return
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the session is gone; shutdown takes care of the process
        finally:
            self._mark_closed()

    def _refuse_oversized(self) -> None:
        reason = f"the server sent a message over the {self.max_message_bytes:,}-byte limit"
        log.error("mcp.message_too_large", server=self.server, reason=reason)
        self.close_reason = reason

    async def _pump_stdin(self) -> None:
        """Write what the session's sends could not write at once."""
        await self.write_stream.pump()

    def _stdin_broken(self, exc: OSError) -> None:
        log.debug("mcp.stdin_closed", server=self.server, error=repr(exc))
        # Wake the session: its pending requests get "connection closed", not a hang.
        if self._read_send is not None:
            self._read_send.close()
        self._mark_closed(f"the server stopped reading its stdin ({exc!r})")

    async def _pump_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        pending = b""
        with contextlib.suppress(*_PIPE_ENDED, OSError):
            async for chunk in stderr:
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > STDERR_PENDING_BYTES:
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._log_stderr(line)
        if pending:
            self._log_stderr(pending)

    def _log_stderr(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").rstrip("\r")[:STDERR_LINE_CHARS]
        if text:
            self.stderr_tail.append(text)
            log.debug("mcp.server_stderr", server=self.server, line=text)

    async def _stop(self) -> None:
        """Close stdin, give a started server a moment, then end its whole process group."""
        if self._read_send is not None:
            self._read_send.close()
        self.write_stream.release()
        # A server that never finished start-up has nothing to save: it is killed at once.
        if self.started and not await self._wait_exit(self.stdin_close_grace_s):
            self._signal_group(signal.SIGTERM)
            await self._wait_exit(TERM_GRACE_S)
        # Descendants can outlive the leader: the group is always killed.
        self._signal_group(signal.SIGKILL)
        if await self._wait_exit(KILL_WAIT_S):
            await self.process.aclose()
        else:
            log.error("mcp.server_unkillable", server=self.server, pid=self.process.pid)
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError, anyio.ClosedResourceError):
                        await stream.aclose()

    async def _wait_exit(self, timeout_s: float) -> bool:
        with anyio.move_on_after(timeout_s):
            await self.process.wait()
        return self.process.returncode is not None

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


def describe_returncode(returncode: int | None) -> str:
    """An exit status in words."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@contextlib.asynccontextmanager
async def open_stdio_transport(
    config: StdioServerConfig,
    *,
    server: str,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    on_close: Callable[[], None] | None = None,
    stdin_close_grace_s: float = DEFAULT_STDIN_CLOSE_GRACE_S,
) -> AsyncIterator[StdioTransport]:
    """Start a stdio server and yield its transport; leaving stops the whole process group.

    Args:
        config: the server's entry.
        server: its name, for logs and errors.
        max_message_bytes: the largest message accepted from the server.
        on_close: called once when the server's output ends or its input breaks.
        stdin_close_grace_s: how long a started server may take to exit by itself once its
            stdin is closed, before its process group is terminated.

    Raises:
        OSError: the command could not be started (not found, not executable, bad cwd).
    """
    # The server's stdin is a pipe of ours, so a send writes to it in the caller's turn
    # (``QueueToStdin``); our end is not inherited (``os.pipe`` is close-on-exec).
    stdin_read, stdin_write = os.pipe()
    try:
        os.set_blocking(stdin_write, False)
        process = await anyio.open_process(
            [config.command, *config.args],
            stdin=stdin_read,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=config.cwd,
            env=server_environment(config.env),
            start_new_session=True,
        )
    except BaseException:
        os.close(stdin_write)
        raise
    finally:
        os.close(stdin_read)  # the server holds its end now
    log.debug("mcp.server_spawned", server=server, pid=process.pid, command=config.command)
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    def stdin_broken(exc: OSError) -> None:
        transport._stdin_broken(exc)

    transport = StdioTransport(
        read_stream=read_receive,
        write_stream=QueueToStdin(stdin_write, stdin_broken),
        process=process,
        server=server,
        max_message_bytes=max_message_bytes,
        on_close=on_close,
        stdin_close_grace_s=stdin_close_grace_s,
        _read_send=read_send,
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(transport._pump_stdout)
            tg.start_soon(transport._pump_stdin)
            tg.start_soon(transport._pump_stderr)
            try:
                yield transport
            finally:
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(shutdown_s(stdin_close_grace_s)),
                ):
                    await transport._stop()
                # A descendant that escaped the group can hold a pipe open: stop reading.
                tg.cancel_scope.cancel()
    finally:
        read_receive.close()
        transport.write_stream.release()
        log.debug("mcp.server_stopped", server=server, status=transport.exit_status())
