"""A hostile MCP server over streamable HTTP or stdio, for the host's limits (issue 14).

Plain asyncio HTTP/1.1 on 127.0.0.1 (one request per connection, ``Connection: close``), so
it can do what no well-behaved framework lets a server do. Run it with ``--port N``, or with
``--stdio`` for newline-delimited JSON-RPC on stdin/stdout (the floods are HTTP only). Over
HTTP it needs no session id, answers GET with 405 (the spec's "no server-initiated stream")
and every notification with 202. Its tools:

echo        ``echo(text)`` answers ``text`` (the server still works after a flood).
flood_sse   answers with one SSE event that never ends: ``data: xxxx...`` without a
            newline, until the client hangs up (or 8 GiB / 60 s, so it always stops).
flood_json  answers with an ``application/json`` body that never ends, likewise.
deep        answers with a result whose ``structuredContent`` is nested 5,000 deep.
fake_image  answers with 2.4 MB of text labelled ``image/png`` (issue 14, item 6).
fake_media  ``fake_media(kind)`` answers one part that must not pass as media (issue 29):
            ``long_mime`` (a real PNG under a 2,000,000-character MIME type),
            ``png_then_text`` (a PNG signature, then 600 KB of text), ``bm_text`` (900 KB of
            text starting with ``BM``, as ``image/bmp``), ``id3_text`` (likewise with ``ID3``,
            as audio).
gzip_bomb   (HTTP) answers with a 64 KB ``Content-Encoding: gzip`` JSON body that inflates to
            64 MiB (issue 29, item 7); the client asked for identity.
unclosed    answers with its id and a result of 5,000 ``[`` never closed (issue 29, item 5).

With ``--sse`` it speaks the legacy HTTP+SSE transport instead: ``GET /sse`` announces
``/messages``, answers arrive as events, and a ``tools/call`` of ``flood_json`` is answered
on its POST with an endless body and no event (``--flood-max-bytes`` bounds every flood).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import zlib
from typing import Any, Final

FLOOD_CHUNK: Final = b"x" * 2**20
FLOOD_MAX_BYTES = 8 * 2**30
BOMB_BYTES: Final = 64 * 2**20
FLOOD_MAX_S: Final = 60.0
DEEP_LEVELS: Final = 5_000

TOOLS: Final = [
    {
        "name": "echo",
        "description": "Answer the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "flood_sse",
        "description": "An endless event.",
        "inputSchema": {"type": "object"},
    },
    {"name": "flood_json", "description": "An endless body.", "inputSchema": {"type": "object"}},
    {"name": "deep", "description": "Deeply nested JSON.", "inputSchema": {"type": "object"}},
    {"name": "gzip_bomb", "description": "A gzip bomb.", "inputSchema": {"type": "object"}},
    {"name": "unclosed", "description": "Unclosed brackets.", "inputSchema": {"type": "object"}},
    {
        "name": "fake_image",
        "description": "Text labelled a PNG.",
        "inputSchema": {"type": "object"},
    },
    {
        "name": "fake_media",
        "description": "A part that must not pass as media.",
        "inputSchema": {"type": "object", "properties": {"kind": {"type": "string"}}},
    },
]
_PNG_2PX: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVQI12P4z8AAAAMBAQAY3Y2wAAAAAElFTkSuQmCC"
)


def _fake_media(kind: str) -> dict[str, Any]:
    if kind == "long_mime":
        data, mime, kind_ = _PNG_2PX, "image/png" + "x" * 2_000_000, "image"
    elif kind == "png_then_text":
        data, mime, kind_ = b"\x89PNG\r\n\x1a\n" + b"just text. " * 55_000, "image/png", "image"
    elif kind == "bm_text":
        data, mime, kind_ = b"BM" + b"bitmap? text. " * 65_000, "image/bmp", "image"
    else:
        data, mime, kind_ = b"ID3" + b"audio? text. " * 70_000, "audio/mpeg", "audio"
    return {"type": kind_, "mimeType": mime, "data": base64.b64encode(data).decode()}


def _head(status: str, content_type: str | None, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Connection: close"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _flood(writer: asyncio.StreamWriter, opening: bytes) -> None:
    writer.write(opening)
    sent = 0
    started = time.monotonic()
    try:
        while sent < FLOOD_MAX_BYTES and time.monotonic() - started < FLOOD_MAX_S:
            writer.write(FLOOD_CHUNK)
            await writer.drain()
            sent += len(FLOOD_CHUNK)
    except (ConnectionError, OSError):
        pass  # the client hung up: what the flood waits for


def _answer(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


def _reply(message: dict[str, Any]) -> bytes:
    """The answer to a request that is not a flood."""
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        return _answer(
            request_id,
            {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            },
        )
    if method == "tools/list":
        return _answer(request_id, {"tools": TOOLS})
    if method == "tools/call" and params.get("name") == "deep":
        nested = "[" * DEEP_LEVELS + "]" * DEEP_LEVELS
        return (
            '{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"result":{"content":[],'
            '"structuredContent":{"a":' + nested + "}}}"
        ).encode()
    if method == "tools/call" and params.get("name") == "fake_media":
        kind = str((params.get("arguments") or {}).get("kind", ""))
        return _answer(request_id, {"content": [_fake_media(kind)]})
    if method == "tools/call" and params.get("name") == "unclosed":
        return (
            b'{"jsonrpc":"2.0","id":'
            + json.dumps(request_id).encode()
            + b',"result":'
            + b"[" * DEEP_LEVELS
        )
    if method == "tools/call" and params.get("name") == "fake_image":
        data = base64.b64encode(b"this is text, not a PNG\n" * 100_000).decode()
        image = {"type": "image", "mimeType": "image/png", "data": data}
        return _answer(request_id, {"content": [image]})
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        return _answer(request_id, {"content": [{"type": "text", "text": text}]})
    error = {"code": -32601, "message": f"no method {method!r}"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


async def _post(message: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    if "id" not in message:
        writer.write(_head("202 Accepted", None, 0))
        return
    name = (message.get("params") or {}).get("name")
    if message.get("method") == "tools/call" and name == "flood_sse":
        opening = _head("200 OK", "text/event-stream", None) + b"event: message\ndata: "
        await _flood(writer, opening)
    elif message.get("method") == "tools/call" and name == "gzip_bomb":
        body = _gzip_bomb(message["id"])
        head = _head("200 OK", "application/json", len(body))
        writer.write(head[:-2] + b"Content-Encoding: gzip\r\n\r\n" + body)
    elif message.get("method") == "tools/call" and name == "flood_json":
        opening = _head("200 OK", "application/json", None)
        opening += b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode()
        opening += b',"result":{"content":[{"type":"text","text":"'
        await _flood(writer, opening)
    else:
        body = _reply(message)
        writer.write(_head("200 OK", "application/json", len(body)) + body)


def _gzip_bomb(request_id: Any) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    opening = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
    body = [packer.compress(opening + b',"result":{"content":[{"type":"text","text":"')]
    body += [packer.compress(FLOOD_CHUNK) for _ in range(BOMB_BYTES // len(FLOOD_CHUNK))]
    body += [packer.compress(b'"}]}}'), packer.flush()]
    return b"".join(body)


_sse_streams: list[asyncio.StreamWriter] = []


async def _serve_sse(method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
    """Legacy HTTP+SSE: one event stream, answers as its events, POSTs answered 202."""
    if method == "GET" and path.startswith("/sse"):
        writer.write(_head("200 OK", "text/event-stream", None))
        writer.write(b"event: endpoint\ndata: /messages\n\n")
        await writer.drain()
        _sse_streams.append(writer)
        await asyncio.Event().wait()  # open until the client goes
    message = json.loads(body)
    if message.get("method") == "tools/call" and message["params"].get("name") == "flood_json":
        await _flood(writer, _head("200 OK", "application/json", None))
        return
    writer.write(_head("202 Accepted", None, 0))
    await writer.drain()
    if "id" in message and "method" in message:
        for stream in _sse_streams:
            stream.write(b"event: message\ndata: " + _reply(message) + b"\n\n")
            await stream.drain()


def serve_stdio() -> None:
    """Newline-delimited JSON-RPC on stdin and stdout."""
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" in message and "method" in message:
            sys.stdout.buffer.write(_reply(message) + b"\n")
            sys.stdout.buffer.flush()


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method = request_line.split(" ", 1)[0]
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if LEGACY_SSE:
            await _serve_sse(method, request_line.split(" ")[1], body, writer)
        elif method == "POST":
            await _post(json.loads(body), writer)
        elif method == "DELETE":
            writer.write(_head("200 OK", None, 0))
        else:
            writer.write(_head("405 Method Not Allowed", None, 0))
        await writer.drain()
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


LEGACY_SSE = False

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--flood-max-bytes", type=int, default=FLOOD_MAX_BYTES)
    options = parser.parse_args()
    LEGACY_SSE = options.sse
    FLOOD_MAX_BYTES = options.flood_max_bytes
    if options.stdio:
        serve_stdio()
    else:
        asyncio.run(main(options.port))
