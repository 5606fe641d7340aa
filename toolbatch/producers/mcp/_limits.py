"""Limits on what an MCP server may send, over stdio and over streamable HTTP.

A server is a peer the host does not control: one endless SSE event once took the host to
2.6 GB in 8 s. Every message from a server is bounded by the same number, the
``max_message_bytes`` of ``McpServers`` (``DEFAULT_MAX_MESSAGE_BYTES``, 64 MiB):

* **stdio**: a line longer than that is dropped by the transport (``_stdio.py``).
* **streamable HTTP, SSE**: one server-sent event may hold at most that many bytes; the
  SDK's own event decoder stops buffering there (``max_sse_event_size``). The call whose
  response stream hit the cap gets a ``CallFailure`` saying so (``oversized_failure``); the
  HTTP session is not torn down, so the next call goes on normally.
* **streamable HTTP, a JSON body** (``application/json``, and anything else that is not an
  event stream): at most that many bytes of body; past it the read stops with
  ``McpResponseTooLarge``, which the SDK turns into a JSON-RPC error for that request.
* **compression**: the client asks for ``Accept-Encoding: identity``; a server that
  compresses anyway (gzip or deflate) is inflated here, at most ``DECODED_CHUNK_BYTES``
  (64 KiB) at a time, and the cap counts the inflated bytes, so a 0.5 MB gzip bomb stops at
  the cap instead of taking 512 MiB. Any other encoding is refused (``McpResponseRefused``).
* **legacy HTTP+SSE**: events are bounded by the SDK's own per-event cap (1 MiB); the body of
  a message POST (which the protocol leaves empty and the SDK ignores) is read to at most
  the cap and then dropped, so the session goes on (``bounded_http_client_factory``).
* **nesting, both transports**: a message nested deeper than ``MAX_JSON_DEPTH`` (128)
  levels is refused before it is parsed (``refuse_deep_message``); when it is a response,
  its request is answered with an error at once instead of waiting for the call timeout.
  Over HTTP pydantic-core parses the messages and refuses more than about 255 levels as a
  parse error for that request.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Final

import httpx2
import mcp_types as types
import structlog
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError

from toolbatch._core import MAX_JSON_DEPTH, JsonTooDeep, top_level_member

__all__ = [
    "DECODED_CHUNK_BYTES",
    "SSE_LIMIT_MARKER",
    "McpResponseRefused",
    "McpResponseTooLarge",
    "bounded_http_client",
    "bounded_http_client_factory",
    "oversized_failure_message",
    "refuse_deep_message",
]

log = structlog.get_logger("toolbatch.mcp")

DECODED_CHUNK_BYTES: Final = 64 * 1024
"""A compressed body is inflated at most this many bytes at a time (deflate can expand 1,032
times: one 64 KiB read could otherwise become 64 MiB before anything counts it)."""
SSE_LIMIT_MARKER: Final = "byte limit"
"""How the SDK's ``SSEError`` names its cap ("Server-sent event exceeded the N byte
limit."); ``tests/producers/mcp/test_http_limits.py`` pins it."""


class McpResponseTooLarge(httpx2.StreamError):
    """An HTTP response body from an MCP server passed ``max_message_bytes``."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(
            f"the response from {url} passed {limit:,} bytes and was cut off (McpServers' "
            f"max_message_bytes); ask the server for less, or raise the limit"
        )
        self.limit = limit


class McpResponseRefused(httpx2.StreamError):
    """An HTTP response from an MCP server in a content encoding toolbatch does not decode."""

    def __init__(self, url: str, encoding: str) -> None:
        super().__init__(
            f"the response from {url} is compressed with {encoding!r}, which toolbatch does not "
            f"decode (it asks for identity and accepts gzip or deflate); have the server send "
            f"it uncompressed"
        )
        self.encoding = encoding


class _Inflater:
    """gzip or deflate inflated in pieces of at most ``DECODED_CHUNK_BYTES``."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding == "gzip"
        self._inflater: zlib._Decompress | None = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._inflater is None:
            if not data:
                return
            # "deflate" is meant as zlib-wrapped, but servers also send it raw (as httpx
            # allows): a zlib header is a multiple of 31 with method 8.
            zlib_header = (
                len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            )
            wbits = (
                16 + zlib.MAX_WBITS
                if self._gzip
                else zlib.MAX_WBITS
                if zlib_header
                else -zlib.MAX_WBITS
            )
            self._inflater = zlib.decompressobj(wbits)
        inflater = self._inflater
        while not inflater.eof:
            piece = inflater.decompress(data, DECODED_CHUNK_BYTES)
            data = inflater.unconsumed_tail
            if piece:
                yield piece
            if not data and len(piece) < DECODED_CHUNK_BYTES:
                return


def _body_encoding(response: httpx2.Response) -> str | None:
    """``"gzip"``, ``"deflate"``, ``None`` (identity); raises for anything else."""
    codings = [
        coding.strip().lower()
        for coding in response.headers.get("content-encoding", "").split(",")
        if coding.strip() and coding.strip().lower() != "identity"
    ]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in ("gzip", "x-gzip", "deflate"):
        return "deflate" if codings[0] == "deflate" else "gzip"
    raise McpResponseRefused(str(response.request.url), ", ".join(codings))


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body inflated here (when compressed) and cut at ``limit`` inflated bytes:
    past it the read fails, or with ``drop_excess`` ends there (logged)."""

    def __init__(
        self,
        stream: httpx2.AsyncByteStream,
        *,
        url: str,
        limit: int | None,
        encoding: str | None,
        drop_excess: bool = False,
    ) -> None:
        self._stream = stream
        self._url = url
        self._limit = limit
        self._inflater = None if encoding is None else _Inflater(encoding)
        self._drop_excess = drop_excess

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            pieces = (chunk,) if self._inflater is None else self._inflater.feed(chunk)
            for piece in pieces:
                seen += len(piece)
                if self._limit is not None and seen > self._limit:
                    if self._drop_excess:
                        log.warning("mcp.response_body_dropped", url=self._url, limit=self._limit)
                        return
                    raise McpResponseTooLarge(self._url, self._limit)
                yield piece

    async def aclose(self) -> None:
        await self._stream.aclose()


def bounded_http_client(
    headers: Mapping[str, str] | None,
    timeout: httpx2.Timeout | None,
    *,
    max_message_bytes: int,
    response_hooks: Sequence[Callable[[httpx2.Response], Awaitable[None]]] = (),
    auth: httpx2.Auth | None = None,
    drop_excess: bool = False,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose non-SSE response bodies stop at ``max_message_bytes``.

    Every body is inflated here when the server compressed it (so the cap counts what it
    inflates to). Event streams are left to the SDK's per-event cap (pass the same number as
    ``max_sse_event_size``): one stream may carry any number of events. With
    ``drop_excess`` a body past the cap ends there instead of failing the read (for bodies
    nobody reads: legacy SSE's message POSTs). ``response_hooks`` run on every response
    after the bound is put in place.
    """

    async def bound(response: httpx2.Response) -> None:
        encoding = _body_encoding(response)
        content_type = response.headers.get("content-type", "").lower()
        event_stream = content_type.startswith("text/event-stream")
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        response.stream = _BoundedBody(
            stream,
            url=str(response.request.url),
            limit=None if event_stream else max_message_bytes,
            encoding=encoding,
            drop_excess=drop_excess,
        )
        if encoding is not None:
            del response.headers["content-encoding"]  # inflated here, not again by httpx

    return httpx2.AsyncClient(
        headers={"accept-encoding": "identity", **(headers or {})},
        timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
        auth=auth,
        event_hooks={"response": [bound, *response_hooks]},
    )


def bounded_http_client_factory(
    max_message_bytes: int,
) -> Callable[..., httpx2.AsyncClient]:
    """An ``httpx_client_factory`` for the SDK's ``sse_client``: bounded clients whose
    message-POST bodies past ``max_message_bytes`` are dropped, not read."""

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return bounded_http_client(
            headers, timeout, max_message_bytes=max_message_bytes, auth=auth, drop_excess=True
        )

    return factory


def oversized_failure_message(
    exc: MCPError, *, server: str, tool: str, max_message_bytes: int
) -> str | None:
    """The message for a call whose SSE response hit the per-event cap, else ``None``."""
    if exc.code != types.CONNECTION_CLOSED or SSE_LIMIT_MARKER not in exc.message:
        return None
    return (
        f"MCP server {server!r} sent an event larger than {max_message_bytes:,} bytes in "
        f"answer to {tool!r}; it was cut off and the call failed (McpServers' "
        f"max_message_bytes); ask the tool for less output, or raise the limit"
    )


def refuse_deep_message(line: bytes) -> SessionMessage | Exception:
    """A message nested deeper than ``MAX_JSON_DEPTH``: an error for its request, if any.

    Returned as the stdio transport returns what it cannot decode (the SDK expects an
    exception on its read stream). A response (an id and no string ``method``) becomes a
    JSON-RPC error for that id, so its call fails at once; a request or notification from
    the server is only refused (its ids are not ours to answer on the read stream).
    """
    refused = JsonTooDeep(MAX_JSON_DEPTH)
    request_id = top_level_member(line, "id")
    is_response = not isinstance(top_level_member(line, "method"), str)
    if is_response and isinstance(request_id, str | int) and not isinstance(request_id, bool):
        message = f"the server's response was refused: {refused}"
        error = ErrorData(code=types.INTERNAL_ERROR, message=message)
        return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    return refused
