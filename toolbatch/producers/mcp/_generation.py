"""One generation of an MCP server: how its session is opened, and why a start-up failed.

A generation is one server process (or one HTTP session) with one ``ClientSession``
(``McpConnection`` runs them one after another). Opening it picks the transport: a stdio
process through ``_stdio.py`` (its script checked against the fingerprints taken at set-up
first), streamable HTTP through a bounded ``httpx2`` client, or the SDK's legacy
``sse_client``. A start-up that fails is said in one message naming the server, what went
wrong and what to change (``start_failure``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio
import httpx2
import mcp_types as types
import structlog
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolbatch.errors import McpError
from toolbatch.producers.mcp._config import (
    HttpServerConfig,
    ServerConfig,
    StdioServerConfig,
)
from toolbatch.producers.mcp._documents import read_env_file
from toolbatch.producers.mcp._limits import bounded_http_client, bounded_http_client_factory
from toolbatch.producers.mcp._stdio import StdioTransport, open_stdio_transport
from toolbatch.sandbox import ScriptPins

__all__ = [
    "Generation",
    "TransportKind",
    "list_tools",
    "open_session",
    "other_protocol",
    "root_cause",
    "start_failure",
    "stderr_tail",
]

log = structlog.get_logger("toolbatch.mcp")

HTTP_CONNECT_TIMEOUT_S: Final = 30.0
HTTP_READ_TIMEOUT_S: Final = 300.0
"""An idle SSE stream may stay open this long; calls are bounded by their own timeout."""
STDERR_LINES_IN_ERRORS: Final = 5

try:
    _VERSION = importlib.metadata.version("toolbatch")
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    _VERSION = "0"
CLIENT_INFO: Final = types.Implementation(name="toolbatch", version=_VERSION)

TransportKind = Literal["stdio", "streamable-http", "sse"]


@dataclass(slots=True, eq=False)
class Generation:
    """One server process or HTTP session, and the events its calls and supervisor share."""

    number: int
    settled: anyio.Event = field(default_factory=anyio.Event)
    lost: anyio.Event = field(default_factory=anyio.Event)
    stopped: anyio.Event = field(default_factory=anyio.Event)
    relist: anyio.Event = field(default_factory=anyio.Event)
    session: ClientSession | None = None
    transport: StdioTransport | None = None
    failure: McpError | None = None
    failed_at: float | None = None
    died_starting: bool = False


def root_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group wraps what a transport raised)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _log_server_message(params: types.LoggingMessageNotificationParams) -> None:
    log.debug("mcp.server_log", level=params.level, logger=params.logger, data=params.data)


@contextlib.asynccontextmanager
async def open_session(
    generation: Generation,
    kind: TransportKind,
    *,
    name: str,
    config: ServerConfig,
    pins: ScriptPins,
    max_message_bytes: int,
    stdin_close_grace_s: float,
    on_message: Callable[[Any], Awaitable[None]],
    on_session_id: Callable[[str], None],
) -> AsyncIterator[ClientSession]:
    """The session of ``generation`` over ``kind``; a stdio server's process is
    ``generation.transport`` while it is open.

    Args:
        generation: the generation being opened.
        kind: the transport to use (``stdio`` for a stdio entry).
        name: the server's name, for messages.
        config: its entry.
        pins: the fingerprints of the scripts a stdio entry runs, checked before it starts.
        max_message_bytes: the largest message accepted from the server.
        stdin_close_grace_s: how long a stdio server may take to exit once its stdin closes.
        on_message: the session's handler of notifications and transport errors.
        on_session_id: told the streamable-HTTP session id the server assigns.
    """
    if isinstance(config, StdioServerConfig):
        changed = pins.changed()
        if changed is not None:
            log.warning("mcp.script_changed", server=name, reason=changed)
            raise McpError(f"MCP server {name!r} was not started: {changed}", server=name)
        async with open_stdio_transport(
            _with_env_file(name, config),
            server=name,
            max_message_bytes=max_message_bytes,
            on_close=generation.lost.set,
            stdin_close_grace_s=stdin_close_grace_s,
        ) as transport:
            generation.transport = transport
            session = _session(transport.read_stream, transport.write_stream, on_message)
            async with session:
                yield session
        return
    assert isinstance(config, HttpServerConfig)
    if kind == "sse":
        async with (
            sse_client(
                config.url,
                headers=config.headers,
                timeout=HTTP_CONNECT_TIMEOUT_S,
                sse_read_timeout=HTTP_READ_TIMEOUT_S,
                httpx_client_factory=bounded_http_client_factory(max_message_bytes),
            ) as (read_stream, write_stream),
            _session(read_stream, write_stream, on_message) as session,
        ):
            yield session
        return

    async def note_session_id(response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            on_session_id(session_id)

    timeout = httpx2.Timeout(HTTP_CONNECT_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S)
    limit = max_message_bytes  # one event or JSON body at most (_limits.py)
    async with (
        bounded_http_client(
            config.headers,
            timeout,
            max_message_bytes=limit,
            response_hooks=[note_session_id],
        ) as client,
        streamable_http_client(config.url, http_client=client, max_sse_event_size=limit) as (
            read_stream,
            write_stream,
        ),
        _session(read_stream, write_stream, on_message) as session,
    ):
        yield session


def _with_env_file(name: str, config: StdioServerConfig) -> StdioServerConfig:
    if config.env_file is None:
        return config
    try:
        variables = read_env_file(config.env_file, cwd=config.cwd)
    except (OSError, UnicodeDecodeError) as exc:
        raise McpError(
            f"MCP server {name!r} could not be started: its envFile "
            f"{config.env_file!r} cannot be read ({getattr(exc, 'strerror', None) or exc}); "
            f"fix the path (relative paths start at the server's cwd) or remove 'envFile'",
            server=name,
        ) from exc
    return config.model_copy(update={"env": {**variables, **config.env}})


def _session(read_stream: Any, write_stream: Any, handler: Any) -> ClientSession:
    return ClientSession(
        read_stream,
        write_stream,
        client_info=CLIENT_INFO,
        logging_callback=_log_server_message,
        message_handler=handler,
    )


def start_failure(
    generation: Generation,
    exc: BaseException,
    *,
    name: str,
    config: ServerConfig,
    start_timeout_s: float,
    start_timeout_source: str,
) -> McpError:
    """Why ``generation`` of server ``name`` did not start, for the user, with the fix."""
    if isinstance(exc, McpError):
        return exc
    where = f"MCP server {name!r}"
    transport = generation.transport
    if isinstance(exc, OSError) and transport is None and isinstance(config, StdioServerConfig):
        message = (
            f"{where} could not be started: {exc.strerror or exc} running "
            f"{config.command!r}; check its 'command', 'args' and 'cwd'"
        )
    elif isinstance(exc, TimeoutError):
        message = (
            f"{where} did not finish start-up (initialize and tools/list) within "
            f"{start_timeout_s:g} s ({start_timeout_source}); if it is only "
            f"slow, raise 'startup_timeout_sec' in its entry, or for every server "
            f"--mcp-startup-timeout SECONDS (toolbatch run, serve, acp), "
            f"SchedulerConfig(mcp_startup_timeout=...) or MCP_TIMEOUT (milliseconds)"
        )
    elif generation.died_starting and transport is not None and transport.returncode is not None:
        # The exit status says more than the broken pipe it caused.
        message = f"{where} exited during start-up with {transport.exit_status()}"
        if transport.close_reason and "stdin" not in transport.close_reason:
            message += f" ({transport.close_reason})"
    elif transport is not None and transport.closed.is_set():
        reason = transport.close_reason or f"the server exited ({transport.exit_status()})"
        message = f"{where} stopped during start-up: {reason}"
    elif isinstance(exc, httpx2.ConnectError):
        url = config.url if isinstance(config, HttpServerConfig) else ""
        refused = _caused_by(exc, ConnectionRefusedError) or "refused" in str(exc).lower()
        why = "connection refused" if refused else str(exc) or type(exc).__name__
        message = f"{where} at {url!r} could not be reached: {why}; is the server running?"
    elif isinstance(exc, MCPError):
        message = f"{where} refused start-up: {exc.message} (JSON-RPC error {exc.code})"
        if isinstance(config, HttpServerConfig) and config.transport == "auto":
            message += "; it answered neither as streamable HTTP nor as HTTP+SSE"
    elif isinstance(exc, httpx2.HTTPError):
        url = config.url if isinstance(config, HttpServerConfig) else ""
        message = f"{where} at {url!r} could not be reached: {exc!r}"
    else:
        message = f"{where} failed during start-up: {exc!r}"
    if transport is not None and transport.stderr_tail:
        message += "; its last stderr lines: " + " | ".join(stderr_tail(transport))
    return McpError(message, server=name)


def stderr_tail(transport: StdioTransport) -> list[str]:
    """The last lines a stdio server wrote to stderr, as many as messages quote."""
    return list(transport.stderr_tail)[-STDERR_LINES_IN_ERRORS:]


def other_protocol(exc: BaseException) -> bool:
    """Whether a failed streamable-HTTP start means "reachable, but speaks something else"."""
    cause = root_cause(exc)
    if isinstance(cause, httpx2.ConnectError | httpx2.TimeoutException | TimeoutError):
        return False
    return isinstance(cause, MCPError | httpx2.HTTPError)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool the server lists, page after page."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
