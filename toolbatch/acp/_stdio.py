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
leave bounded, whoever built them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

import structlog

from toolbatch.transports import dumps_json_line, project_acp_update

__all__ = ["MAX_INCOMING_LINE_BYTES", "SESSION_UPDATE", "AcpStdioTransport", "project_message"]

log = structlog.get_logger("toolbatch.acp")

SESSION_UPDATE: Final = "session/update"
MAX_INCOMING_LINE_BYTES: Final = 64 * 2**20
"""A longer incoming line is dropped (logged); ACP's own default limit is 50 MiB."""


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
    """Newline-delimited JSON-RPC messages over an asyncio reader and writer.

    Implements the ``acp`` package's message ``Transport`` protocol (``send``,
    ``receive``, ``close``). Build it with ``await AcpStdioTransport.open_stdio()`` for the
    process's own stdin and stdout.

    Args:
        reader: where messages arrive, one JSON object per line.
        writer: where messages go.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._closed = False
        self._input_ended = False

    @classmethod
    async def open_stdio(cls) -> AcpStdioTransport:
        """A transport over this process's stdin and stdout."""
        from acp import stdio_streams

        reader, writer = await stdio_streams(limit=MAX_INCOMING_LINE_BYTES)
        return cls(reader, writer)

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line (``session/update`` projected first)."""
        if self._closed:
            raise ConnectionError("the ACP transport is closed")
        line = dumps_json_line(project_message(message)) + "\n"
        # One write per message: concurrent senders never interleave within a line.
        self._writer.write(line.encode("utf-8"))
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message, or ``None`` at the end of the input."""
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                log.warning("acp.bad_frame", error=str(exc)[:200], bytes=len(line))
                continue
            if not isinstance(message, dict):
                log.warning("acp.bad_frame", error="not a JSON object", bytes=len(line))
                continue
            return message

    async def _read_line(self) -> bytes | None:
        dropped = 0
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if dropped or not exc.partial:
                    return None
                return exc.partial
            except asyncio.LimitOverrunError as exc:
                dropped += len(await self._reader.readexactly(exc.consumed))
                continue
            if dropped:
                log.error(
                    "acp.frame_too_large",
                    bytes=dropped + len(line),
                    limit=MAX_INCOMING_LINE_BYTES,
                )
                dropped = 0
                continue
            return line

    @property
    def input_ended(self) -> bool:
        """Whether ``end_input`` was called."""
        return self._input_ended

    def end_input(self) -> None:
        """Behave as if the input ended: ``receive`` returns ``None`` once read up."""
        self._input_ended = True
        self._reader.feed_eof()

    async def close(self) -> None:
        """Stop sending; the output stream is flushed and closed."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("acp.close_drain_failed", error=str(exc))
        self._writer.close()
