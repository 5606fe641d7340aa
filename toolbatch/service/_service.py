"""The stdio JSON-RPC service behind ``toolbatch serve``: a tool runtime for any language.

JSON-RPC 2.0, one message per line on stdin and stdout (like MCP and ACP stdio). Lines are
framed on ``"\\n"`` only: U+2028 and U+2029 stay raw inside strings, so a reader must split on
``"\\n"``, never with ``str.splitlines()``. Output lines are ``JSON.stringify``-compatible
UTF-8 (see ``dumps_json_line``); each message is one whole line, written by one writer.

Methods (params and results are JSON objects; field names are snake_case)::

    initialize    params: anything (optional)
                  result: {"protocol_version": 1, "server_info": {"name", "version"},
                           "capabilities": {"batch_progress": true, "batch_cancel": true,
                                            "concurrent_batches": true},
                           "default_budget_chars": int | null}
    tools/list    result: {"tools": [{"name", "description", "input_schema"}]}
    batch/run     params: {"calls": [{"id": str, "name": str, "args": {...}}],
                           "budget": int | null (optional)}
                  result: {"responses": [{"call_id", "name", "status", "parts", "display"}],
                           "parts": [<wire parts>],
                           "stop_reason": str (only when a hook stopped the agent)}
    batch/cancel  params: {"request_id": <the id of a batch/run request>}
                  result: {"cancelled": bool}  (false: no such batch is running any more)
    shutdown      result: {}; in-flight batches are cancelled and answered first, then the
                  service answers and exits.

``budget`` is in code points of model-facing text for that batch: a positive int, ``0`` to
disable the budget, or ``null`` / absent for the service's default. ``parts`` are exactly
what the model should receive (finalized against the budget, complete output persisted at
most once); ``display`` is the rich user-facing value, not budgeted but bounded on the wire
like every transport's display: a string is projected to 65,536 bytes of JSON (head and
tail around a marker), and any other value whose JSON is larger becomes such a projected
string of its JSON. Internal state such as ``persisted_output_files`` never reaches the
wire.

While a batch runs the service sends ``batch/progress`` notifications, every one before the
batch's answer::

    {"request_id": <batch/run id>, "call_id": str, "index": int, "status": str,
     "message": str (only with "running", when the tool reports progress)}

``status`` is ``queued`` (every call, when the batch starts), ``running`` (started, or a
progress report; a call answered without running, such as an unknown tool, is started and
finished at once), then the call's final status: ``success``, ``error``, ``cancelled``,
``skipped`` or ``duplicate``. ``index`` is the call's position in ``calls`` (call ids need
not be unique).

Several ``batch/run`` requests may be in flight at once; each gets its own answer. A
cancelled batch still answers, its unfinished calls with ``cancelled`` responses and no
process left behind. ``batch/cancel`` and ``shutdown`` may also be sent as notifications
(no ``id``). A notification (an object without ``id``) is never answered, not even
with an error: a bad one is logged and dropped.

Errors: ``-32700`` a line that is not JSON, ``-32600`` a message that is not a request
(including JSON-RPC batch arrays, which are not supported), a ``batch/run`` id already in
flight, a line longer than ``MAX_MESSAGE_BYTES`` (64 MiB; answered with id ``null``) or
nested deeper than ``MAX_JSON_DEPTH`` (128 levels, ``toolbatch._core._json_limits``; answered under
the request's id when it can be read without parsing, else ``null``), ``-32601`` an
unknown method, ``-32602`` bad params, ``-32603`` an internal error.
Each message names the problem and the fix. The service never dies of bad input.

End of input: when stdin closes, batches in flight run to the end and answer, then the
service exits. SIGTERM and SIGINT cancel them (they still answer), then it exits.

Backpressure and memory. Output is queued for one writer task, whole lines as UTF-8 bytes
packed into segments of up to ``WRITE_COALESCE_BYTES`` (1 MiB); each wake-up of the writer
writes as much as the client takes, not ``PIPE_BUF`` (``NonBlockingOutput``: a pipe is
written through a non-blocking description of its own, grown to 1 MiB, a socket with
``MSG_DONTWAIT``; stdout's own blocking mode is left alone), so progress does not pile up
while a large batch keeps the event loop busy. While more than
``OUTPUT_HIGH_WATER_BYTES`` (8 MiB) wait to be written (the client stopped reading its
stdout), the service reads no new request, so a client that stalls gets its own writes
blocked instead of the service buffering without limit. Meanwhile progress reports that
carry a ``message`` are dropped (a newer one follows); the ``queued``, ``running`` and
final status notifications never are, so memory is bounded by the batches already in
flight. A ``batch/run`` answer is not built whole: it is serialized ``STREAM_SLICE``
(1,000) responses at a time as the writer reaches it, and what was written is released; a
running batch keeps only its calls, not its parsed request. Output made as it is written
counts toward the mark from the moment it is queued, by an estimate of its size
(``QUEUED_LINE_BYTES`` per "queued" line; an answer ``ANSWER_BASE_BYTES`` plus
``ANSWER_RESPONSE_BYTES`` per response plus twice its text), so a client that sends 30,000
small requests and reads nothing stops being read once about 8 MiB of answers wait, instead
of the service holding 30,000 answers. Input limits: a line of at
most ``MAX_MESSAGE_BYTES`` (64 MiB) nested at most ``MAX_JSON_DEPTH`` (128) levels; either
excess is a ``-32600`` for that line only.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

import anyio
import anyio.from_thread
import structlog
from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from toolbatch._core import (
    ABSENT,
    MAX_JSON_DEPTH,
    BatchObserver,
    DescriptorIO,
    JsonTooDeep,
    LineSplitter,
    NonBlockingOutput,
    Oversized,
    Part,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
    check_json_depth,
    parts_adapter,
    top_level_member,
    trusted_call,
)
from toolbatch.errors import ConfigError
from toolbatch.finalize import budget_from_wire
from toolbatch.transports import (
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    project_json_string,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_MESSAGE_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVICE_PROTOCOL_VERSION",
    "BatchBackend",
    "BatchCallParams",
    "BatchRunParams",
    "batch_result",
    "loads_json",
    "parse_batch",
    "serve",
    "serve_stdio",
]

log = structlog.get_logger("toolbatch.service")

SERVICE_PROTOCOL_VERSION: Final = 1
"""The version of the method set above, reported by ``initialize``."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

SERVICE_DISPLAY_JSON_BYTES: Final = HEADLESS_TOOL_RESULT_JSON_BYTES
"""The most a response's ``display`` takes on the wire, in UTF-8 bytes of its JSON."""
SERVICE_MARKER: Final = "\n[... truncated for the stdio service ...]\n"
MAX_MESSAGE_BYTES: Final = 64 * 2**20
"""The longest request line accepted; a longer one is discarded and answered with -32600."""
WRITE_COALESCE_BYTES: Final = 1 * 2**20
"""Queued output lines are packed into segments of up to this many bytes, one write each."""
OUTPUT_HIGH_WATER_BYTES: Final = 8 * 2**20
"""Backpressure: while more than this is queued for stdout, no new request is read and
progress reports with a message are dropped (status changes never are)."""
QUEUED_LINE_BYTES: Final = 128
"""What one "queued" progress line counts toward ``OUTPUT_HIGH_WATER_BYTES`` until written."""
ANSWER_BASE_BYTES: Final = 1_024
ANSWER_RESPONSE_BYTES: Final = 256
"""A queued ``batch/run`` answer counts ``ANSWER_BASE_BYTES``, this much per response and
twice its model-facing text (in ``responses`` and in ``parts``) until it is written."""
STREAM_SLICE: Final = 1_000
"""A ``batch/run`` answer is serialized this many responses (or parts) at a time."""
SHUTDOWN_GRACE_S: Final = 30.0
"""How long cancelled batches get to stop their tools and answer before they are cut off."""

_METHODS: Final = ("initialize", "tools/list", "batch/run", "batch/cancel", "shutdown")

IdKey: TypeAlias = tuple[str, object]
"""A request id made hashable without conflating 1 and "1" (1 and 1.0 are the same id)."""


# -- the backend the service drives ------------------------------------------------------


class BatchBackend(Protocol):
    """What the service runs batches with; the CLI wires a ``ToolScheduler`` behind it."""

    @property
    def default_budget(self) -> int | None:
        """The budget of a batch that gives none (``None``: no budget)."""
        ...

    async def wait_for_tools(self) -> Sequence[ToolDeclaration]:
        """Every tool a batch may call, once the MCP servers have started or failed."""
        ...

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        /,
        *,
        budget: int | None,
        abort: anyio.Event,
        observer: BatchObserver,
    ) -> Turn:
        """Run ``calls`` and return the turn finalized against ``budget`` (``None``: none)."""
        ...


# -- the batch/run params, shared with ``toolbatch run`` ------------------------------------


class BatchCallParams(BaseModel):
    """One call of a ``batch/run``: ``{"id": str, "name": str, "args": {...}}``."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(strict=True)
    name: str = Field(strict=True)
    args: dict[str, JsonValue] = Field(default_factory=dict)


class BatchRunParams(BaseModel):
    """The ``batch/run`` params: the calls and an optional budget.

    ``budget``: code points of model-facing text for the batch; ``0`` disables the budget,
    ``None`` (or leaving it out) means the runtime's default.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    calls: list[BatchCallParams]
    budget: int | None = Field(default=None, strict=True, ge=0)

    def tool_calls(self) -> list[ToolCall]:
        """The calls as ``ToolCall``s, each with its position as ordinal."""
        return [
            ToolCall(id=call.id, name=call.name, args=call.args, ordinal=index)
            for index, call in enumerate(self.calls)
        ]

    def resolve_budget(self, default: int | None) -> int | None:
        """The budget to finalize with: this batch's, else ``default``; ``None`` disables."""
        return budget_from_wire(self.budget, default)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def loads_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse one JSON document strictly (UTF-8; no NaN or Infinity; at most ``max_depth``
    levels of arrays and objects, checked before parsing).

    Raises:
        JsonTooDeep: the document nests deeper than ``max_depth`` (a ``ValueError``).
        ValueError: the text is not JSON; the message says where.
    """
    check_json_depth(data, max_depth)
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"invalid UTF-8 at byte {exc.start} ({data[exc.start : exc.start + 1]!r})"
            ) from None
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:8]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        where = where.lstrip(".") or "(document)"
        given = error.get("input")
        shown = "" if error["type"] == "missing" else f" (got {_short(given)})"
        problems.append(f"{where}: {error['msg']}{shown}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def _short(value: object, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_batch(document: object) -> BatchRunParams:
    """A batch from its JSON value: the ``batch/run`` params object or a bare list of calls.

    Raises:
        ConfigError: the value has the wrong shape; the message names each problem.
    """
    if isinstance(document, list):
        document = {"calls": document}
    elif not isinstance(document, dict):
        raise ConfigError(
            f'a batch is an object {{"calls": [...], "budget": ...}} or a list of calls '
            f'{{"id", "name", "args"}}, got {_short(document)}'
        )
    try:
        return BatchRunParams.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid batch: {_describe(exc)}; each call is "
            f'{{"id": str, "name": str, "args": {{...}}}} and budget is an int >= 0 or null'
        ) from None


_PLAIN_BATCH_KEYS: Final = frozenset({"calls", "budget"})
_PLAIN_CALL_KEYS: Final = frozenset({"id", "name", "args"})


def _plain_batch(params: dict[str, Any]) -> tuple[list[ToolCall], int | None] | None:
    """The calls and budget of ``params`` when they plainly have the right shape, built
    without a model per call; ``None`` sends the params through ``parse_batch``.

    ``params`` comes from ``loads_json``, so every value is JSON already; what is left to
    check is what ``BatchRunParams`` checks: the keys, string ids and names, object args
    and a budget that is an int >= 0 or null. Anything else takes the validating path,
    which names each problem. A 100,000-call request then costs its calls alone, not its
    calls twice over (the params models and the ``ToolCall``s).
    """
    calls = params.get("calls")
    budget = params.get("budget")
    if not params.keys() <= _PLAIN_BATCH_KEYS or type(calls) is not list:
        return None
    if budget is not None and (type(budget) is not int or budget < 0):
        return None
    built: list[ToolCall] = []
    names: dict[str, str] = {}  # one string per tool name, not one per call
    for index, call in enumerate(calls):
        if type(call) is not dict or not call.keys() <= _PLAIN_CALL_KEYS:
            return None
        call_id, name, args = call.get("id"), call.get("name"), call.get("args", {})
        if type(call_id) is not str or type(name) is not str or type(args) is not dict:
            return None
        built.append(trusted_call(call_id, names.setdefault(name, name), args, index))
    return built, budget


def _dump_parts(parts: Sequence[Part]) -> list[JsonValue]:
    dumped: list[JsonValue] = parts_adapter.dump_python(
        list(parts), mode="json", by_alias=True, exclude_none=True
    )
    return dumped


def bounded_display(display: JsonValue) -> JsonValue:
    """``display`` within ``SERVICE_DISPLAY_JSON_BYTES`` of JSON on the wire."""
    if isinstance(display, str):
        return project_json_string(display, SERVICE_DISPLAY_JSON_BYTES, SERVICE_MARKER)
    if display is None or isinstance(display, bool | int | float):
        return display
    rendered = json.dumps(display, ensure_ascii=False)
    if len(rendered) * 6 <= SERVICE_DISPLAY_JSON_BYTES:
        return display  # cannot be over the bound: no byte count needed
    projected = project_json_string(rendered, SERVICE_DISPLAY_JSON_BYTES, SERVICE_MARKER)
    return display if projected is rendered else projected


def batch_result(turn: Turn) -> dict[str, JsonValue]:
    """The ``batch/run`` result for a completed turn (never ``persisted_output_files``)."""
    result: dict[str, JsonValue] = {
        "responses": [
            {
                "call_id": response.call_id,
                "name": response.name,
                "status": response.status,
                "parts": _dump_parts(response.parts),
                "display": bounded_display(response.display),
            }
            for response in turn.responses
        ],
        "parts": _dump_parts(turn.parts),
    }
    if turn.stop_reason is not None:
        result["stop_reason"] = turn.stop_reason
    return result


# -- the service -----------------------------------------------------------------------


class _JsonRpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _valid_id(value: object) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _id_key(value: object) -> IdKey:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    kind = "number" if isinstance(value, int | float) else type(value).__name__
    return (kind, value)


def _validate(message: object) -> tuple[str, object, bool]:
    """The method, the params and whether it is a request; raises ``_JsonRpcError``."""
    if isinstance(message, list):
        raise _JsonRpcError(
            INVALID_REQUEST,
            "JSON-RPC batches (arrays) are not supported; send one request object per line",
        )
    if not isinstance(message, dict):
        raise _JsonRpcError(
            INVALID_REQUEST, f"a request must be a JSON object, got {_short(message)}"
        )
    is_request = "id" in message
    if is_request and not _valid_id(message["id"]):
        raise _JsonRpcError(
            INVALID_REQUEST,
            f"id must be a string, a number or null, got {_short(message['id'])}",
        )
    if message.get("jsonrpc") != "2.0":
        raise _JsonRpcError(
            INVALID_REQUEST, f'"jsonrpc" must be "2.0", got {_short(message.get("jsonrpc"))}'
        )
    method = message.get("method")
    if not isinstance(method, str):
        raise _JsonRpcError(
            INVALID_REQUEST,
            f'"method" must be a string, got {_short(method)}; methods: {", ".join(_METHODS)}',
        )
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        raise _JsonRpcError(INVALID_REQUEST, f'"params" must be an object, got {_short(params)}')
    return method, params, is_request


class _BatchProgress:
    """Turns one batch's observer events into ``batch/progress`` notifications."""

    def __init__(self, service: _Service, request_id: object) -> None:
        self._service = service
        self._request_id = request_id

    def _notify(self, call: ToolCall, status: str, message: str | None = None) -> None:
        params: dict[str, JsonValue] = {
            "request_id": self._request_id,  # type: ignore[dict-item]  # a checked id
            "call_id": call.id,
            "index": call.ordinal,
            "status": status,
        }
        if message is not None:
            params["message"] = message
        self._service.notify("batch/progress", params, droppable=message is not None)

    def queued(self, calls: Sequence[ToolCall]) -> None:
        # One "queued" line per call, made as the writer gets to them: a 100,000-call
        # batch does not queue 100,000 lines before its first call runs.
        self._service.enqueue_stream(self._queued_lines(calls), QUEUED_LINE_BYTES * len(calls))

    def _queued_lines(self, calls: Sequence[ToolCall]) -> Iterator[str]:
        for call in calls:
            params = {
                "request_id": self._request_id,
                "call_id": call.id,
                "index": call.ordinal,
                "status": "queued",
            }
            message = {"jsonrpc": "2.0", "method": "batch/progress", "params": params}
            yield dumps_json_line(message) + "\n"

    def call_started(self, call: ToolCall) -> None:
        self._notify(call, "running")

    def call_progress(self, call: ToolCall, message: str) -> None:
        self._notify(call, "running", message)

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        self._notify(call, response.status)


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
        plain = _plain_batch(params)
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
        log.info(
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


@dataclass(slots=True)
class _Stream:
    """Output made as it is written, and the bytes it counts toward the mark until then."""

    pieces: Iterator[str]
    size: int


class _Outbox:
    """The output waiting for the writer, in order: whole lines, packed as UTF-8 into
    segments of up to ``WRITE_COALESCE_BYTES``, and output made as it is written
    (``Iterator[str]``: the "queued" lines, a ``batch/run`` answer).

    A queued line costs its bytes, not a string object and a queue slot of its own: the
    running and finished notifications of a 100,000-call batch that wait behind a slow
    reader take 130 bytes each, not 190. The writer takes a whole segment at a time, so a
    segment is never added to once the writer has it, and it is released once written.
    """

    def __init__(self) -> None:
        self._items: deque[bytearray | _Stream] = deque()
        self._ready: anyio.Event | None = None
        self._closed = False

    def put_line(self, line: str) -> int:
        """Queue one whole line; the bytes it adds (``0`` once the outbox is closed)."""
        if self._closed:
            return 0
        data = line.encode("utf-8")
        items = self._items
        last = items[-1] if items else None
        if isinstance(last, bytearray) and len(last) + len(data) <= WRITE_COALESCE_BYTES:
            last += data
        else:
            items.append(bytearray(data))
            self._wake()
        return len(data)

    def put_stream(self, pieces: Iterator[str], size: int) -> int:
        """Queue output that is made as it is written (whole lines, in order), counted as
        ``size`` bytes; the bytes it adds (``0`` once the outbox is closed)."""
        if self._closed:
            return 0
        self._items.append(_Stream(pieces, size))
        self._wake()
        return size

    def _wake(self) -> None:
        if self._ready is not None:
            self._ready.set()
            self._ready = None

    def close(self) -> None:
        """No more output: ``get`` gives what is queued, then ``None``."""
        self._closed = True
        self._wake()

    def abandon(self) -> None:
        """The output is gone: drop what is queued and whatever comes."""
        self._closed = True
        self._items.clear()

    async def get(self) -> bytearray | _Stream | None:
        """The next segment or stream; ``None`` once closed and empty."""
        while not self._items:
            if self._closed:
                return None
            self._ready = anyio.Event()
            await self._ready.wait()
        return self._items.popleft()


def _streamed_answer(request_id: object, turn: Turn) -> Iterator[str]:
    """The ``batch/run`` answer line for ``turn``, in pieces, dropping what was written.

    Byte for byte ``dumps_json_line({"jsonrpc", "id", "result": batch_result(turn)})``, but
    never more than ``STREAM_SLICE`` responses' JSON at once: a 100,000-call answer does
    not have to exist whole, as dicts, as a string and as bytes, before its first byte is
    written. The responses it has written are released as it goes. Should serializing
    fail half-way (it has a fallback for every value, so it should not), the torn line is
    ended and a ``-32603`` error for the request follows on its own line.
    """
    pieces = _answer_pieces(request_id, turn)
    del turn  # the pieces release each response once written; nothing else may hold them
    try:
        yield from pieces
    except Exception as exc:
        log.exception("service.answer_failed", request_id=request_id)
        error = {"code": INTERNAL_ERROR, "message": f"the answer could not be written: {exc!r}"}
        yield "\n" + dumps_json_line({"jsonrpc": "2.0", "id": request_id, "error": error}) + "\n"


def _answer_pieces(request_id: object, turn: Turn) -> Iterator[str]:
    responses: list[ToolCallResponse | None] = list(turn.responses)
    parts = list(turn.parts)
    stop_reason = turn.stop_reason
    del turn
    yield '{"jsonrpc":"2.0","id":' + dumps_json_line(request_id) + ',"result":{"responses":['  # type: ignore[arg-type]  # a checked id
    for start in range(0, len(responses), STREAM_SLICE):
        chunk: list[JsonValue] = []
        for index in range(start, min(start + STREAM_SLICE, len(responses))):
            response = responses[index]
            assert response is not None
            responses[index] = None
            chunk.append(
                {
                    "call_id": response.call_id,
                    "name": response.name,
                    "status": response.status,
                    "parts": _dump_parts(response.parts),
                    "display": bounded_display(response.display),
                }
            )
        yield ("," if start else "") + dumps_json_line(chunk)[1:-1]
    yield '],"parts":['
    for start in range(0, len(parts), STREAM_SLICE):
        piece = dumps_json_line(_dump_parts(parts[start : start + STREAM_SLICE]))[1:-1]
        yield ("," if start else "") + piece
    tail = "]"
    if stop_reason is not None:
        tail += ',"stop_reason":' + dumps_json_line(stop_reason)
    yield tail + "}}\n"


async def _write_loop(outbox: _Outbox, output: NonBlockingOutput, service: _Service) -> None:
    """Write what is queued, in order, until the outbox closes or the output fails.

    Whatever queued up while the last write waited goes out in the next one: a segment
    (up to ``WRITE_COALESCE_BYTES`` of whole lines) is one ``output.write``, which writes
    as much per wake-up as the reader takes.
    """
    while True:
        item = await outbox.get()
        if item is None:
            return
        try:
            if isinstance(item, bytearray):
                try:
                    await output.write(item)
                finally:
                    service.written(len(item))
            else:
                try:
                    await _write_streamed(item.pieces, output.write)
                finally:
                    service.written(item.size)
        except OSError as exc:
            log.warning("service.output_closed", error=str(exc))
            outbox.abandon()
            service.stop()
            return
        del item  # released as written, not held while the next one is awaited


async def _write_streamed(pieces: Iterator[str], write: Callable[[bytes], Awaitable[None]]) -> None:
    """Write ``pieces`` in writes of about ``WRITE_COALESCE_BYTES``, as they are made."""
    buffered: list[str] = []
    size = 0
    for piece in pieces:
        buffered.append(piece)
        size += len(piece)
        if size >= WRITE_COALESCE_BYTES:
            data = "".join(buffered).encode("utf-8")
            buffered.clear()
            size = 0
            await write(data)
    if buffered:
        await write("".join(buffered).encode("utf-8"))


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
