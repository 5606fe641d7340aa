"""ACP's JSON-RPC lines over stdin and stdout, written the way JavaScript writes them.

The ``acp`` package frames messages with ``json.dumps``'s defaults, which escape every
non-ASCII character: ``漢`` becomes the 6 bytes ``\\u6f22`` and an emoji 12. The ACP display
budget is stated in UTF-8 bytes of ``JSON.stringify`` (``ACP_TOOL_RESULT_JSON_BYTES``), so
with those defaults a bounded field of CJK text would still take twice its budget on the
wire, three times for emoji. ``AcpStdioTransport`` is a message-level transport (the
``acp.connection.Connection`` seam the package uses for HTTP and WebSocket) that writes
compact UTF-8 JSON with lone surrogates escaped, byte for byte what ``JSON.stringify``
writes. It is also the one place every outgoing message passes, so it applies
``project_acp_update`` to each ``session/update`` there: live and replayed updates alike
leave bounded, whoever built them. It reads and writes the raw descriptors as ``toolbatch
serve`` does (``toolbatch._core._descriptor_io``), so stdin and stdout may also be regular files
or ``/dev/null``, which asyncio's pipe transports refuse.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import deque
from typing import Any, Final

import anyio
import structlog

from toolbatch._core import (
    MAX_JSON_DEPTH,
    DescriptorIO,
    LineSplitter,
    Oversized,
    json_too_deep,
    top_level_member,
)
from toolbatch.transports import dumps_json_line, project_acp_update

__all__ = [
    "MAX_INCOMING_LINE_BYTES",
    "MAX_PENDING_SENDS",
    "OUTPUT_HIGH_WATER_BYTES",
    "SESSION_UPDATE",
    "AcpStdioTransport",
    "project_message",
]

log = structlog.get_logger("toolbatch.acp")

SESSION_UPDATE: Final = "session/update"
MAX_INCOMING_LINE_BYTES: Final = 64 * 2**20
"""A longer incoming line is dropped (logged); ACP's own default limit is 50 MiB."""
OUTPUT_HIGH_WATER_BYTES: Final = 8 * 2**20
MAX_PENDING_SENDS: Final = 256
"""Backpressure: while more than ``OUTPUT_HIGH_WATER_BYTES`` wait to be written, or more
than ``MAX_PENDING_SENDS`` messages wait for their turn to be written, no new message is
read, so a client that stops reading stops its own requests instead of the agent holding
an answer and a task for each."""
INVALID_REQUEST: Final = -32600
CLOSE_FLUSH_S: Final = 5.0
"""How long closing waits for a reader to take the messages still queued."""


def project_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with the update of a ``session/update`` notification projected.

    Returns ``message`` itself when nothing needed bounding.
    """
    if message.get("method") != SESSION_UPDATE:
        return message
    params = message.get("params")
    if not isinstance(params, dict):
        return message
    update = params.get("update")
    if not isinstance(update, dict):
        return message
    projected = project_acp_update(update)
    if projected is update:
        return message
    return {**message, "params": {**params, "update": projected}}


class AcpStdioTransport:
    """Newline-delimited JSON-RPC messages over an input and an output file descriptor.

    Implements the ``acp`` package's message ``Transport`` protocol (``send``,
    ``receive``, ``close``). Build it with ``AcpStdioTransport.open_stdio()`` for the
    process's own stdin and stdout. Each descriptor may be a pipe, a socket, a terminal, a
    regular file or ``/dev/null``; neither is closed by the transport.

    The end of the input means two things. On a pipe or socket the client has gone: the
    connection closes at once and prompts still running are cancelled. A regular file is
    a script of requests read ahead of their answers (``toolbatch acp < requests.jsonl >
    replies.jsonl``): its end closes the connection only once every request read from it
    has been answered, or when the agent asks the client something (no answer can come).
    A message sent after ``close`` is dropped (logged), except a request, which raises
    ``ConnectionError``.

    Limits on what arrives: a line over ``MAX_INCOMING_LINE_BYTES`` (64 MiB) is dropped and
    logged; a line nested deeper than ``MAX_JSON_DEPTH`` (128 levels of arrays and objects,
    ``toolbatch._core._json_limits``) is never parsed: a request among them is answered with a
    JSON-RPC ``-32600`` error under its id, anything else is logged. Either way the
    connection goes on with the next line. While the client is not reading what is sent
    (over ``OUTPUT_HIGH_WATER_BYTES`` unwritten, or over ``MAX_PENDING_SENDS`` messages
    waiting), nothing more is read.

    Args:
        input_fd: where messages arrive, one JSON object per line.
        output_fd: where messages go.
    """

    def __init__(self, input_fd: int, output_fd: int) -> None:
        self._input = DescriptorIO(input_fd)
        self._output = DescriptorIO(output_fd)
        self._splitter = LineSplitter(MAX_INCOMING_LINE_BYTES)
        self._lines: deque[bytes | Oversized] = deque()
        self._input_done = False
        self._input_ended = False
        self._read_scope: anyio.CancelScope | None = None
        self._unsent = bytearray()
        self._send_lock = anyio.Lock()
        self._closed = False
        self._unanswered: set[str] = set()
        self._asked_client = False
        self._answered = anyio.Event()
        self._sending = 0
        self._room: anyio.Event | None = None

    @classmethod
    def open_stdio(cls) -> AcpStdioTransport:
        """A transport over this process's stdin and stdout (file descriptors 0 and 1)."""
        return cls(sys.stdin.fileno(), sys.stdout.fileno())

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (``session/update`` projected first)."""
        is_request = "method" in message and "id" in message
        if self._closed:
            if is_request:
                raise ConnectionError("the ACP transport is closed")
            log.debug("acp.send_after_close", method=message.get("method"))
            return
        if is_request:
            self._asked_client = True  # a script cannot answer: stop waiting for it
            self._answered.set()
        elif "method" not in message and "id" in message:
            self._unanswered.discard(_id_key(message["id"]))
            if not self._unanswered:
                self._answered.set()
        # Queued whole before anything is written: lines of concurrent senders never
        # interleave, and a sender cancelled mid-write leaves the rest to the next one.
        self._unsent += (dumps_json_line(project_message(message)) + "\n").encode("utf-8")
        self._sending += 1
        try:
            await self._write_unsent()
        finally:
            self._sending -= 1
            self._check_room()

    async def _write_unsent(self) -> None:
        async with self._send_lock:
            while self._unsent:
                written = await self._output.write_some(self._unsent)
                del self._unsent[:written]
                self._check_room()

    @property
    def _backlogged(self) -> bool:
        return len(self._unsent) > OUTPUT_HIGH_WATER_BYTES or self._sending > MAX_PENDING_SENDS

    def _check_room(self) -> None:
        if self._room is not None and (not self._backlogged or self._closed):
            self._room.set()
            self._room = None

    async def _wait_for_room(self) -> None:
        """While the client is not reading: stop reading its messages."""
        while self._backlogged and not (self._closed or self._input_ended):
            if self._room is None:
                self._room = anyio.Event()
                log.info("acp.backpressure", unsent_bytes=len(self._unsent), sends=self._sending)
            await self._room.wait()

    async def receive(self) -> dict[str, Any] | None:
        """The next message, or ``None`` at the end of the input."""
        while True:
            await self._wait_for_room()
            line = await self._next_line()
            if line is None:
                return None
            if isinstance(line, Oversized):
                log.error("acp.frame_too_large", limit=MAX_INCOMING_LINE_BYTES)
                continue
            if not line.strip():
                continue
            if json_too_deep(line, MAX_JSON_DEPTH):
                await self._refuse_deep(line)
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                log.warning("acp.bad_frame", error=str(exc)[:200], bytes=len(line))
                continue
            if not isinstance(message, dict):
                log.warning("acp.bad_frame", error="not a JSON object", bytes=len(line))
                continue
            if "method" in message and "id" in message:
                self._unanswered.add(_id_key(message["id"]))
            return message

    async def _refuse_deep(self, line: bytes) -> None:
        """A line nested too deep to parse safely: answer its request, if any, and go on."""
        log.warning("acp.frame_too_deep", limit=MAX_JSON_DEPTH, bytes=len(line))
        request_id = top_level_member(line, "id")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int | float):
            return  # a notification, or no id that can be read: nothing to answer
        message = (
            f"request refused: JSON nested deeper than {MAX_JSON_DEPTH} levels of arrays and "
            f"objects; send flatter data"
        )
        error = {"code": INVALID_REQUEST, "message": message}
        with contextlib.suppress(OSError):
            await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def _next_line(self) -> bytes | Oversized | None:
        while not self._lines:
            if self._input_done or self._input_ended:
                return None
            chunk = await self._read()
            if chunk:
                self._lines.extend(self._splitter.feed(chunk))
            else:
                self._input_done = True
                if not self._input_ended:
                    self._lines.extend(self._splitter.finish())
                if not self._lines and self._input.regular_file:
                    await self._wait_for_answers()
        return self._lines.popleft()

    async def _wait_for_answers(self) -> None:
        """At the end of a script: until its requests are answered (or ``end_input``)."""
        with anyio.CancelScope() as scope:
            self._read_scope = scope
            try:
                while self._unanswered and not (self._asked_client or self._input_ended):
                    self._answered = anyio.Event()
                    await self._answered.wait()
            finally:
                self._read_scope = None

    async def _read(self) -> bytes:
        """The next chunk of input; ``b""`` at its end, on a read error or on ``end_input``."""
        with anyio.CancelScope() as scope:
            self._read_scope = scope
            try:
                return await self._input.read()
            except OSError as exc:  # a broken input is the end of the input
                log.warning("acp.input_failed", error=str(exc))
            finally:
                self._read_scope = None
        return b""

    @property
    def input_ended(self) -> bool:
        """Whether ``end_input`` was called."""
        return self._input_ended

    def end_input(self) -> None:
        """Behave as if the input ended: ``receive`` returns ``None`` once read up."""
        self._input_ended = True
        if self._read_scope is not None:
            self._read_scope.cancel()
        if self._room is not None:
            self._room.set()
            self._room = None

    async def close(self) -> None:
        """Stop sending; what is queued is written first (for at most ``CLOSE_FLUSH_S``)."""
        if self._closed:
            return
        self._closed = True
        self._check_room()
        with anyio.move_on_after(CLOSE_FLUSH_S) as flush:
            try:
                await self._write_unsent()
            except OSError as exc:
                log.debug("acp.close_flush_failed", error=str(exc))
        if flush.cancelled_caught:
            log.warning("acp.output_abandoned", unsent_bytes=len(self._unsent))


def _id_key(request_id: object) -> str:
    """A JSON-RPC id as a set key (``1`` and ``1.0`` are one id, ``"1"`` another)."""
    if type(request_id) is int:
        return str(request_id)  # json.dumps's text for an int, without its encoder's cost
    if isinstance(request_id, float) and request_id.is_integer():
        request_id = int(request_id)
    return json.dumps(request_id)
