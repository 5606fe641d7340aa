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
  ``McpResponseTooLarge``, which the SDK turns into a JSON-RPC error for that request. The
  client asks for ``Accept-Encoding: identity``; a server that compresses anyway is
  bounded by its compressed bytes only.
* **nesting, both transports**: a message nested deeper than ``MAX_JSON_DEPTH`` (128)
  levels is refused before it is parsed (``refuse_deep_message``); when it is a response,
  its request is answered with an error at once instead of waiting for the call timeout.
  Over HTTP pydantic-core parses the messages and refuses more than about 255 levels as a
  parse error for that request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Final

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError

from toolbatch._core import MAX_JSON_DEPTH, JsonTooDeep, top_level_member

__all__ = [
    "SSE_LIMIT_MARKER",
    "McpResponseTooLarge",
    "bounded_http_client",
    "oversized_failure_message",
    "refuse_deep_message",
]

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


class _BoundedBody(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, *, url: str, limit: int) -> None:
        self._stream = stream
        self._url = url
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise McpResponseTooLarge(self._url, self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def bounded_http_client(
    headers: Mapping[str, str],
    timeout: httpx2.Timeout,
    *,
    max_message_bytes: int,
    response_hooks: Sequence[Callable[[httpx2.Response], Awaitable[None]]] = (),
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose non-SSE response bodies stop at ``max_message_bytes``.

    Event streams are left to the SDK's per-event cap (pass the same number as
    ``max_sse_event_size``): one stream may carry any number of events. ``response_hooks``
    run on every response after the bound is put in place.
    """

    async def bound(response: httpx2.Response) -> None:
        content_type = response.headers.get("content-type", "").lower()
        if not content_type.startswith("text/event-stream"):
            stream = response.stream
            assert isinstance(stream, httpx2.AsyncByteStream)
            url = str(response.request.url)
            response.stream = _BoundedBody(stream, url=url, limit=max_message_bytes)

    return httpx2.AsyncClient(
        headers={"accept-encoding": "identity", **headers},
        timeout=timeout,
        event_hooks={"response": [bound, *response_hooks]},
    )


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
