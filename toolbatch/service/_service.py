"""The stdio loop of ``toolbatch serve``: reads request lines, dispatches them, runs the
batches in flight and stops them (the protocol: ``toolbatch.service._protocol``; the
output and its backpressure: ``toolbatch.service._output``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

import anyio
import anyio.from_thread
import structlog
from anyio.abc import TaskGroup
from pydantic import JsonValue

from toolbatch._core import (
    ABSENT,
    DescriptorIO,
    JsonTooDeep,
    LineSplitter,
    NonBlockingOutput,
    Oversized,
    ToolCall,
    top_level_member,
)
from toolbatch.errors import ConfigError
from toolbatch.finalize import budget_from_wire
from toolbatch.service._batches import (
    ANSWER_BASE_BYTES,
    ANSWER_RESPONSE_BYTES,
    BatchBackend,
    _BatchProgress,
    _streamed_answer,
)
from toolbatch.service._output import OUTPUT_HIGH_WATER_BYTES, _Outbox, _write_loop
from toolbatch.service._protocol import (
    _METHODS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVICE_PROTOCOL_VERSION,
    IdKey,
    _id_key,
    _JsonRpcError,
    _short,
    _valid_id,
    _validate,
    loads_json,
    parse_batch,
    plain_batch,
)
from toolbatch.transports import dumps_json_line

__all__ = [
    "serve",
    "serve_stdio",
]

log = structlog.get_logger("toolbatch.service")

SHUTDOWN_GRACE_S: Final = 30.0
"""How long cancelled batches get to stop their tools and answer before they are cut off."""


class _Service:
    """Dispatches request lines; owns the in-flight batches. One per ``serve`` call."""

    def __init__(
        self,
        backend: BatchBackend,
        outbox: _Outbox,
        *,
        server_name: str,
        server_version: str,
    ) -> None:
        self._backend = backend
        self._outbox = outbox
        self._server_info: dict[str, JsonValue] = {
            "name": server_name,
            "version": server_version,
        }
        self._inflight: dict[IdKey, anyio.Event] = {}
        self._batches: TaskGroup | None = None
        self._read_scope = anyio.CancelScope()
        self._batch_scope = anyio.CancelScope()
        self._shutdown_id: object = None
        self._shutdown_requested = False
        self._stopping = False
        self._loop_thread = threading.get_ident()
        self._queued_bytes = 0
        self._room: anyio.Event | None = None
        self.progress_dropped = 0

    # -- output

    def _send(self, message: dict[str, Any]) -> None:
        self._queued_bytes += self._outbox.put_line(dumps_json_line(message) + "\n")

    def enqueue_stream(self, lines: Iterator[str], size: int) -> None:
        """Queue output that is made as it is written (whole lines, in order), counted as
        ``size`` bytes toward the high-water mark until it is written."""
        self._queued_bytes += self._outbox.put_stream(lines, size)

    def written(self, size: int) -> None:
        """The writer wrote ``size`` bytes of queued lines: let reading go on below the mark."""
        self._queued_bytes -= size
        if self._room is not None and self._queued_bytes <= OUTPUT_HIGH_WATER_BYTES:
            self._room.set()
            self._room = None

    @property
    def backlogged(self) -> bool:
        """Whether more than ``OUTPUT_HIGH_WATER_BYTES`` wait to be written."""
        return self._queued_bytes > OUTPUT_HIGH_WATER_BYTES

    async def _wait_for_room(self) -> None:
        while self.backlogged and not self._stopping:
            if self._room is None:
                self._room = anyio.Event()
                log.info("service.backpressure", queued_bytes=self._queued_bytes)
            await self._room.wait()

    def notify(self, method: str, params: dict[str, JsonValue], *, droppable: bool = False) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if threading.get_ident() == self._loop_thread:
            self._notify_now(message, droppable)
            return
        # A sync tool in a worker thread reported progress: hand it to the event loop.
        try:
            anyio.from_thread.run_sync(self._notify_now, message, droppable)
        except RuntimeError:  # not an anyio worker thread: nowhere safe to send it
            log.debug("service.progress_dropped", method=method)

    def _notify_now(self, message: dict[str, Any], droppable: bool) -> None:
        if droppable and self.backlogged:
            self.progress_dropped += 1  # the reader is behind: a newer report will come
            return
        self._send(message)

    def _answer(self, request_id: object, result: JsonValue) -> None:
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def _error(self, request_id: object, code: int, message: str) -> None:
        log.info("service.error_answered", code=code, message=message)
        self._send(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        )

    # -- lifecycle

    def stop(self) -> None:
        """Stop reading, cancel every batch in flight, and give them a bounded grace."""
        if not self._stopping:
            self._stopping = True
            self._read_scope.cancel()
        for abort in self._inflight.values():
            abort.set()
        self._batch_scope.deadline = min(
            self._batch_scope.deadline, anyio.current_time() + SHUTDOWN_GRACE_S
        )

    async def run(self, read: Callable[[], Awaitable[bytes]]) -> None:
        """Serve until shutdown, EOF or ``stop()``; every batch in flight answers first."""
        with self._batch_scope:
            async with anyio.create_task_group() as batches:
                self._batches = batches
                with self._read_scope:
                    await self._read_loop(read)
                if self._shutdown_requested:
                    self.stop()
        if self._batch_scope.cancelled_caught:
            log.warning("service.batches_cut_off", grace_s=SHUTDOWN_GRACE_S)
        if self._shutdown_requested and self._shutdown_id is not _NO_ANSWER:
            self._answer(self._shutdown_id, {})
        log.info("service.stopped", shutdown=self._shutdown_requested)

    async def _read_loop(self, read: Callable[[], Awaitable[bytes]]) -> None:
        splitter = LineSplitter(MAX_MESSAGE_BYTES)
        while not self._shutdown_requested:
            await self._wait_for_room()  # a reader that stalls stops new requests
            try:
                chunk = await read()
            except OSError as exc:  # a broken input is the end of input
                log.warning("service.input_failed", error=str(exc))
                chunk = b""
            lines = splitter.feed(chunk) if chunk else splitter.finish()
            for line in lines:
                self._handle_line(line)
                if self._shutdown_requested:
                    return
            if not chunk:
                log.info("service.input_closed", batches_in_flight=len(self._inflight))
                return

    # -- dispatch

    def _handle_line(self, line: bytes | Oversized) -> None:
        if isinstance(line, Oversized):
            self._error(
                None,
                INVALID_REQUEST,
                f"request line longer than {MAX_MESSAGE_BYTES:,} bytes was dropped; send "
                f"smaller requests",
            )
            return
        if not line.strip():
            return
        try:
            message = loads_json(line)
        except JsonTooDeep as exc:
            # Answered under the request's own id when it can be read without parsing.
            found = top_level_member(line, "id")
            answer_id = found if found is not ABSENT and _valid_id(found) else None
            self._error(answer_id, INVALID_REQUEST, f"request refused: {exc}")
            return
        except ValueError as exc:
            self._error(None, PARSE_ERROR, f"parse error: {exc}; send one JSON-RPC object per line")
            return
        request_id: object = None
        if isinstance(message, dict) and "id" in message and _valid_id(message["id"]):
            request_id = message["id"]
        is_notification = isinstance(message, dict) and "id" not in message
        try:
            method, params, _ = _validate(message)
            if is_notification:
                self._notification(method, params)
            else:
                self._request(request_id, method, params)
        except _JsonRpcError as exc:
            if is_notification:  # never answered, whatever is wrong with it
                log.warning("service.bad_notification", code=exc.code, error=exc.message)
            else:
                self._error(request_id, exc.code, exc.message)
        except Exception as exc:  # the service never dies of one request
            log.exception("service.request_failed")
            if not is_notification:
                message = f"internal error: {type(exc).__name__}: {exc}"
                self._error(request_id, INTERNAL_ERROR, message)

    def _notification(self, method: str, params: object) -> None:
        if method == "batch/cancel":
            self._cancel(params)
        elif method == "shutdown":
            self._shutdown_requested = True
            self._shutdown_id = _NO_ANSWER
        else:
            log.info("service.notification_ignored", method=method)

    def _request(self, request_id: object, method: str, params: object) -> None:
        if method == "initialize":
            self._answer(request_id, self._initialize())
        elif method == "tools/list":
            # MCP servers start in the background: the list waits for them, batches do not.
            assert self._batches is not None
            self._batches.start_soon(self._list_tools, request_id)
        elif method == "batch/run":
            self._start_batch(request_id, params)
        elif method == "batch/cancel":
            self._answer(request_id, {"cancelled": self._cancel(params)})
        elif method == "shutdown":
            self._shutdown_requested = True
            self._shutdown_id = request_id
        else:
            raise _JsonRpcError(
                METHOD_NOT_FOUND,
                f"method not found: {_short(method)}; methods: {', '.join(_METHODS)}",
            )

    def _initialize(self) -> dict[str, JsonValue]:
        return {
            "protocol_version": SERVICE_PROTOCOL_VERSION,
            "server_info": self._server_info,
            "capabilities": {
                "batch_progress": True,
                "batch_cancel": True,
                "concurrent_batches": True,
            },
            "default_budget_chars": self._backend.default_budget,
        }

    def _cancel(self, params: object) -> bool:
        if not isinstance(params, dict) or "request_id" not in params:
            raise _JsonRpcError(
                INVALID_PARAMS,
                f'batch/cancel params must be {{"request_id": <id of a batch/run request>}}, '
                f"got {_short(params)}",
            )
        target = params["request_id"]
        if not _valid_id(target):
            raise _JsonRpcError(
                INVALID_PARAMS,
                f"request_id must be the string or number id of a batch/run request, got "
                f"{_short(target)}",
            )
        abort = self._inflight.get(_id_key(target))
        if abort is None:
            log.info("service.cancel_missed", request_id=target)
            return False
        abort.set()
        log.info("service.cancel", request_id=target)
        return True

    async def _list_tools(self, request_id: object) -> None:
        declarations = await self._backend.wait_for_tools()
        tools: list[JsonValue] = [d.model_dump(mode="json") for d in declarations]
        self._answer(request_id, {"tools": tools})

    def _start_batch(self, request_id: object, params: object) -> None:
        if not isinstance(params, dict):
            raise _JsonRpcError(
                INVALID_PARAMS,
                f'batch/run params must be an object {{"calls": [...], "budget": ...}}, got '
                f"{_short(params)}",
            )
        plain = plain_batch(params)
        if plain is None:
            try:
                batch = parse_batch(params)
            except ConfigError as exc:
                raise _JsonRpcError(INVALID_PARAMS, str(exc)) from None
            # Only the calls live on (the parsed params are dropped): a batch's memory is
            # its calls and their responses.
            calls, wire_budget = batch.tool_calls(), batch.budget
            del batch
        else:
            calls, wire_budget = plain
        key = _id_key(request_id)
        if key in self._inflight:
            raise _JsonRpcError(
                INVALID_REQUEST,
                f"a batch/run with id {_short(request_id)} is still running; give each "
                f"request its own id",
            )
        abort = anyio.Event()
        self._inflight[key] = abort
        assert self._batches is not None
        budget = budget_from_wire(wire_budget, self._backend.default_budget)
        self._batches.start_soon(self._run_batch, request_id, key, calls, budget, abort)

    async def _run_batch(
        self,
        request_id: object,
        key: IdKey,
        calls: list[ToolCall],
        budget: int | None,
        abort: anyio.Event,
    ) -> None:
        progress = _BatchProgress(self, request_id)
        progress.queued(calls)
        try:
            turn = await self._backend.run_batch(
                calls, budget=budget, abort=abort, observer=progress
            )
        except Exception as exc:
            log.exception("service.batch_failed", request_id=request_id)
            self._error(
                request_id, INTERNAL_ERROR, f"the batch failed: {type(exc).__name__}: {exc}"
            )
            return
        finally:
            self._inflight.pop(key, None)
        log.debug(  # the scheduler's turn.completed already tells each batch at info
            "service.batch_answered",
            request_id=request_id,
            calls=len(calls),
            cancelled=abort.is_set(),
            chars=turn.content_length,
            budget=budget,
        )
        del calls
        size = (
            ANSWER_BASE_BYTES
            + ANSWER_RESPONSE_BYTES * len(turn.responses)
            + 2 * turn.content_length
        )
        self.enqueue_stream(_streamed_answer(request_id, turn), size)


class _NoAnswer:
    """The shutdown came as a notification: nothing to answer."""


_NO_ANSWER: Final = _NoAnswer()


async def serve(
    backend: BatchBackend,
    *,
    input_fd: int,
    output_fd: int,
    server_name: str = "toolbatch",
    server_version: str = "0",
    handle_signals: bool = False,
) -> None:
    """Serve JSON-RPC lines read from ``input_fd`` and written to ``output_fd``.

    Returns after ``shutdown``, end of input or (with ``handle_signals``, in the main
    thread) SIGTERM or SIGINT, once every batch in flight has answered and the answers
    are written. Neither descriptor is closed.
    """
    reader = DescriptorIO(input_fd)
    outbox = _Outbox()
    service = _Service(backend, outbox, server_name=server_name, server_version=server_version)

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.warning("service.signal", signal=signal.Signals(signum).name)
                service.stop()

    output = NonBlockingOutput(output_fd)
    try:
        with anyio.CancelScope() as drain:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_write_loop, outbox, output, service)
                async with anyio.create_task_group() as control:
                    if handle_signals:
                        control.start_soon(watch_signals)
                    try:
                        await service.run(reader.read)
                    finally:
                        outbox.close()
                    control.cancel_scope.cancel()
                # The writer ends once everything queued is written; a reader that never
                # reads again does not keep the service alive for ever.
                drain.deadline = anyio.current_time() + SHUTDOWN_GRACE_S
    finally:
        output.close()  # the private description: the caller's fd then ends the stream
    if drain.cancelled_caught:
        log.warning("service.output_abandoned", grace_s=SHUTDOWN_GRACE_S)


async def serve_stdio(
    backend: BatchBackend,
    *,
    server_name: str = "toolbatch",
    server_version: str = "0",
) -> None:
    """Serve JSON-RPC on this process's stdin and stdout (``toolbatch serve``).

    While it runs, file descriptor 1 points at stderr and 0 at ``/dev/null``, so a stray
    ``print()`` or a child process can never corrupt the protocol stream; the wire uses
    private duplicates. Both are restored on return. SIGTERM and SIGINT stop the service
    (batches in flight are cancelled and still answer).
    """
    sys.stdout.flush()
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        await serve(
            backend,
            input_fd=wire_in,
            output_fd=wire_out,
            server_name=server_name,
            server_version=server_version,
            handle_signals=True,
        )
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        for fd in (devnull, wire_in, wire_out):
            os.close(fd)
