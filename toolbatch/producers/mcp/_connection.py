"""One MCP server: started on demand, called with a timeout, restarted after a crash.

A connection is a sequence of generations. Each generation is one server process (or one
HTTP session) with one ``ClientSession``, run by the connection's supervisor task, which
lives in ``McpServers``'s task group: anyio scopes must be entered and left by the same
task, so calls (which run in the scheduler's tasks) never own the session.

A call borrows the current generation. When the server exits or the connection breaks,
the generation is lost: calls in flight get a clear error, and the next call asks the
supervisor for a new generation and waits for it to be ready. A failed (re)start is
reported to the calls waiting for it, and to every call for the restart back-off after it
(``DEFAULT_RESTART_BACKOFF_S``), so a broken server is not respawned by every call of a batch.

Every generation lists the tools again (a restarted server may offer others), and so does a
``notifications/tools/list_changed`` from the server: the supervisor re-lists, never the
notification handler, which runs inside the session's read loop. An HTTP entry whose
transport is ``auto`` (a bare ``url``) tries streamable HTTP first and, when the server is
reachable but does not speak it, the legacy HTTP+SSE transport through the SDK's
``sse_client``; the transport that worked is kept for restarts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc
import mcp_types as types
import structlog
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from toolbatch.errors import McpError
from toolbatch.producers._base import ProgressCallback
from toolbatch.producers.mcp._config import ServerConfig, StdioServerConfig
from toolbatch.producers.mcp._generation import (
    Generation,
    TransportKind,
    list_tools,
    open_session,
    other_protocol,
    root_cause,
    start_failure,
    stderr_tail,
)
from toolbatch.producers.mcp._limits import oversized_failure_message
from toolbatch.producers.mcp._stdio import DEFAULT_STDIN_CLOSE_GRACE_S
from toolbatch.sandbox import ScriptPins

__all__ = [
    "DEFAULT_RESTART_BACKOFF_S",
    "DEFAULT_START_TIMEOUT_S",
    "CallFailure",
    "McpConnection",
]

log = structlog.get_logger("toolbatch.mcp")

DEFAULT_START_TIMEOUT_S: Final = 30.0
"""How long a server has to answer ``initialize`` and ``tools/list`` (Claude Code's
``MCP_TIMEOUT`` default, 30,000 ms)."""
DEFAULT_RESTART_BACKOFF_S: Final = 2.0
"""After a failed (re)start, calls fail fast with that failure for this long
(``McpServers(restart_backoff_s=...)``)."""
EXIT_REPORT_WAIT_S: Final = 3.0
"""How long a call whose server died waits for its exit status, to report it."""


@dataclass(slots=True, frozen=True)
class CallFailure:
    """Why a call got no result from the server: the message for the model and its type."""

    message: str
    type: str


class McpConnection:
    """The client side of one configured server (see the module docstring).

    Args:
        name: the server's name in the ``mcpServers`` document.
        config: its entry.
        default_timeout_s: the call timeout when the entry sets none.
        start_timeout_s: how long start-up (``initialize`` and ``tools/list``) may take when
            the entry sets no ``startup_timeout_sec``.
        max_message_bytes: the largest message accepted from the server (a stdio line,
            one SSE event or one HTTP JSON body; see ``_limits.py``).
        on_tools_changed: called with the server's name whenever ``tools`` was listed anew
            (every start, every ``notifications/tools/list_changed``).
        start_timeout_source: what set ``start_timeout_s``, for the message of a start-up
            that timed out (the entry's own ``startup_timeout_sec`` is named by itself).
        restart_backoff_s: after a failed (re)start, calls get that failure for this long
            before one of them tries again.
        stdin_close_grace_s: how long a started stdio server may take to exit by itself
            once its stdin is closed, before its process group is terminated.
    """

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        default_timeout_s: float,
        start_timeout_s: float,
        max_message_bytes: int,
        on_tools_changed: Callable[[str], None] | None = None,
        start_timeout_source: str = "the default",
        restart_backoff_s: float = DEFAULT_RESTART_BACKOFF_S,
        stdin_close_grace_s: float = DEFAULT_STDIN_CLOSE_GRACE_S,
    ) -> None:
        self.name = name
        self.config = config
        if config.startup_timeout_s is not None:
            self.start_timeout_s = config.startup_timeout_s
            self.start_timeout_source = "set by 'startup_timeout_sec' in its entry"
        else:
            self.start_timeout_s = start_timeout_s
            self.start_timeout_source = start_timeout_source
        self.max_message_bytes = max_message_bytes
        self.restart_backoff_s = restart_backoff_s
        self.stdin_close_grace_s = stdin_close_grace_s
        self._on_tools_changed = on_tools_changed
        self._resolved: TransportKind | None = None
        self.timeout_s: float = (
            config.timeout_s if config.timeout_s is not None else default_timeout_s
        )
        self.tools: list[types.Tool] = []
        self.tools_version = 0
        self.server_info: types.Implementation | None = None
        self.protocol_version: str | None = None
        """The MCP version the server negotiated (told to telemetry)."""
        self.session_id: str | None = None
        """The streamable-HTTP session id the server assigned (told to telemetry)."""
        self.restarts = 0
        self._generation: Generation | None = None
        self._count = 0
        self._closing = False
        self._wanted: anyio.Event | None = None
        self._running: anyio.CancelScope | None = None
        # What the host runs is what the user configured: the server's script is checked
        # against these fingerprints before every (re)start (toolbatch.sandbox._pinning).
        self.pins = (
            ScriptPins.of([config.command, *config.args], cwd=config.cwd, env=config.env)
            if isinstance(config, StdioServerConfig)
            else ScriptPins()
        )

    @property
    def failure(self) -> McpError | None:
        """Why the latest start failed, if it did."""
        return None if self._generation is None else self._generation.failure

    @property
    def starting(self) -> bool:
        """Whether a start-up (the first, or a restart) is under way."""
        gen = self._generation
        return gen is not None and not gen.settled.is_set() and not self._closing

    @property
    def pid(self) -> int | None:
        """The current stdio server's process id (``None`` for HTTP or when not running)."""
        gen = self._generation
        if gen is None or gen.transport is None or gen.lost.is_set():
            return None
        return gen.transport.process.pid

    # -- the supervisor -----------------------------------------------------------------

    async def supervise(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run generations on demand until ``close()``; started in ``McpServers``'s group."""
        self._wanted = anyio.Event()
        self._start_generation()
        task_status.started()
        try:
            while True:
                await self._wanted.wait()
                if self._closing:
                    return
                self._wanted = anyio.Event()
                generation = self._generation
                assert generation is not None
                # ``close()`` cancels a start-up under way: a server that never answers
                # must not hold up the session's end for its whole start-up timeout.
                with anyio.CancelScope() as self._running:
                    await self._run(generation)
                self._running = None
        finally:
            # A generation requested but never run must still answer the calls waiting on it.
            pending = self._generation
            if pending is not None and not pending.settled.is_set():
                pending.failure = McpError(
                    f"MCP server {self.name!r} is shut down", server=self.name
                )
                pending.lost.set()
                pending.settled.set()
                pending.stopped.set()

    async def wait_started(self) -> None:
        """Wait until the first start-up has succeeded or failed."""
        assert self._generation is not None
        await self._generation.settled.wait()

    def close(self) -> None:
        """Stop the current generation and the supervisor (it cleans up in the background)."""
        self._closing = True
        if self._generation is not None:
            self._generation.lost.set()
            if not self._generation.settled.is_set() and self._running is not None:
                self._running.cancel()
        if self._wanted is not None:
            self._wanted.set()

    def _start_generation(self) -> Generation:
        self._count += 1
        generation = Generation(number=self._count)
        self._generation = generation
        assert self._wanted is not None
        self._wanted.set()
        return generation

    async def _run(self, generation: Generation) -> None:
        try:
            candidates = self._transports()
            for index, kind in enumerate(candidates):
                try:
                    await self._serve(generation, kind)
                    break
                except Exception as exc:
                    fallback = index + 1 < len(candidates)
                    if generation.settled.is_set() or not fallback or not other_protocol(exc):
                        raise
                    log.info(
                        "mcp.transport_fallback",
                        server=self.name,
                        tried=kind,
                        next=candidates[index + 1],
                        error=repr(root_cause(exc)),
                    )
            if not self._closing:
                self._log_exit(generation)
        except Exception as exc:
            if generation.settled.is_set():
                log.warning(
                    "mcp.server_lost",
                    server=self.name,
                    generation=generation.number,
                    error=repr(root_cause(exc)),
                )
            else:
                generation.failure = start_failure(
                    generation,
                    root_cause(exc),
                    name=self.name,
                    config=self.config,
                    start_timeout_s=self.start_timeout_s,
                    start_timeout_source=self.start_timeout_source,
                )
                generation.failed_at = anyio.current_time()
                log.warning("mcp.server_failed", server=self.name, error=str(generation.failure))
        finally:
            generation.session = None
            generation.lost.set()
            generation.settled.set()
            generation.stopped.set()

    def _transports(self) -> list[TransportKind]:
        config = self.config
        if isinstance(config, StdioServerConfig):
            return ["stdio"]
        if self._resolved is not None:
            return [self._resolved]
        if config.transport == "auto":
            return ["streamable-http", "sse"]
        return [config.transport]

    async def _serve(self, generation: Generation, kind: TransportKind) -> None:
        """One generation on one transport: start, list the tools, serve until lost."""
        started = anyio.current_time()
        opening = open_session(
            generation,
            kind,
            name=self.name,
            config=self.config,
            pins=self.pins,
            max_message_bytes=self.max_message_bytes,
            stdin_close_grace_s=self.stdin_close_grace_s,
            on_message=functools.partial(self._on_message, generation),
            on_session_id=self._note_session_id,
        )
        async with opening as session:
            try:
                with anyio.fail_after(self.start_timeout_s):
                    initialized = await session.initialize()
                    tools = await list_tools(session)
            except Exception:
                # Its output ended before ours did: the server exited by itself (what ends
                # it after this point is our shutdown, whose exit status says nothing).
                transport = generation.transport
                generation.died_starting = transport is not None and transport.closed.is_set()
                raise
            if generation.transport is not None:
                generation.transport.started = True  # from now on it is stopped gracefully
            self._resolved = kind
            self._set_tools(tools)
            self.server_info = initialized.server_info
            self.protocol_version = session.protocol_version
            generation.session = session
            generation.settled.set()
            log.info(
                "mcp.server_ready",
                server=self.name,
                generation=generation.number,
                transport=kind,
                tools=len(self.tools),
                start_ms=round((anyio.current_time() - started) * 1000),
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._relist_on_request, generation, session)
                await generation.lost.wait()
                tg.cancel_scope.cancel()

    async def _relist_on_request(self, generation: Generation, session: ClientSession) -> None:
        while True:
            await generation.relist.wait()
            generation.relist = anyio.Event()
            try:
                with anyio.fail_after(self.start_timeout_s):
                    tools = await list_tools(session)
            except Exception as exc:  # the old list stays; the next notification retries
                log.warning("mcp.relist_failed", server=self.name, error=repr(root_cause(exc)))
                continue
            self._set_tools(tools)
            log.info("mcp.tools_relisted", server=self.name, tools=len(tools))

    def _set_tools(self, tools: list[types.Tool]) -> None:
        self.tools = tools
        self.tools_version += 1
        if self._on_tools_changed is not None:
            self._on_tools_changed(self.name)

    async def _on_message(self, generation: Generation, message: Any) -> None:
        if isinstance(message, Exception):
            log.debug("mcp.transport_error", server=self.name, error=repr(message))
        elif isinstance(message, types.ToolListChangedNotification):
            generation.relist.set()

    def _note_session_id(self, session_id: str) -> None:
        self.session_id = session_id

    def _log_exit(self, generation: Generation) -> None:
        transport = generation.transport
        if transport is None:
            reason, tail = "the connection was lost", []
        else:
            reason = transport.close_reason or transport.exit_status()
            tail = stderr_tail(transport)
        log.warning(
            "mcp.server_exited",
            server=self.name,
            generation=generation.number,
            reason=reason,
            stderr_tail=tail,
        )

    # -- calls ----------------------------------------------------------------------------

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        progress: ProgressCallback | None = None,
        started: float | None = None,
    ) -> types.CallToolResult | CallFailure:
        """Call ``tool`` once; every failure comes back as a ``CallFailure``, never raised.

        ``started`` is the time (``anyio.current_time()``) the caller read just before, to
        save reading the clock again; it is read anew after a wait for the server to start.
        """
        generation = self._generation
        if (  # the server is up: no need to await ``_acquire``
            generation is None
            or generation.session is None
            or generation.lost.is_set()
            or self._closing
        ):
            acquired = await self._acquire()
            if isinstance(acquired, CallFailure):
                return acquired
            generation = acquired
            started = None  # the request's clock starts now, after the wait
        session = generation.session
        assert session is not None
        on_progress = _progress_forwarder(progress) if progress is not None else None
        if started is None:
            started = anyio.current_time()
        try:
            # The SDK's own request clock is the timeout (a scope of ours around it would
            # cost a second one): it raises REQUEST_TIMEOUT and sends the server a cancel.
            return await session.call_tool(
                tool, arguments, read_timeout_seconds=timeout_s, progress_callback=on_progress
            )
        except MCPError as exc:
            limit = self.max_message_bytes
            too_large = oversized_failure_message(
                exc, server=self.name, tool=tool, max_message_bytes=limit
            )
            if too_large is not None:
                return CallFailure(too_large, "mcp_message_too_large")
            if exc.code == types.CONNECTION_CLOSED:
                return await self._lost_during(generation, tool)
            # The SDK's clock ran out (a server's own error with that code is its message).
            if exc.code == types.REQUEST_TIMEOUT and anyio.current_time() - started >= timeout_s:
                return CallFailure(
                    f"MCP tool {tool!r} on server {self.name!r} did not finish within "
                    f"{timeout_s:g} s; the call was cancelled",
                    "timeout",
                )
            return CallFailure(
                f"MCP server {self.name!r} rejected the call to {tool!r}: {exc.message} "
                f"(JSON-RPC error {exc.code})",
                "mcp_error",
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return await self._lost_during(generation, tool)
        except Exception as exc:
            log.warning("mcp.bad_result", server=self.name, tool=tool, error=repr(exc))
            return CallFailure(
                f"MCP server {self.name!r} returned an unusable result for {tool!r}: {exc}",
                "mcp_error",
            )

    async def ensure_running(self) -> str | None:
        """Start the server if it is down (within the back-off); ``None`` once it runs,
        else why it does not."""
        acquired = await self._acquire()
        return acquired.message if isinstance(acquired, CallFailure) else None

    async def _acquire(self) -> Generation | CallFailure:
        for _attempt in range(2):
            if self._closing:
                return self._unavailable("is shut down")
            generation = self._generation
            if generation is None:
                return self._unavailable("is not running: use it inside 'async with McpServers'")
            if generation.lost.is_set():
                failed_at = generation.failed_at
                if (
                    failed_at is not None
                    and anyio.current_time() - failed_at < self.restart_backoff_s
                ):
                    return CallFailure(str(generation.failure), "mcp_server_unavailable")
                log.info("mcp.server_restarting", server=self.name, generation=self._count + 1)
                self.restarts += 1
                generation = self._start_generation()
            if not generation.settled.is_set():  # waiting on a set event still yields
                await generation.settled.wait()
            if generation.failure is not None:
                return CallFailure(str(generation.failure), "mcp_server_unavailable")
            if generation.session is not None and not generation.lost.is_set():
                return generation
        return self._unavailable("stopped again right after it was restarted")

    def _unavailable(self, why: str) -> CallFailure:
        return CallFailure(f"MCP server {self.name!r} {why}", "mcp_server_unavailable")

    async def _lost_during(self, generation: Generation, tool: str) -> CallFailure:
        generation.lost.set()
        with anyio.move_on_after(EXIT_REPORT_WAIT_S):
            await generation.stopped.wait()
        if self._closing:
            return CallFailure(
                f"MCP server {self.name!r} was shut down during the call to {tool!r}",
                "mcp_server_unavailable",
            )
        transport = generation.transport
        if transport is not None:
            reason = transport.close_reason or f"the server exited ({transport.exit_status()})"
        else:
            reason = "the connection to the server was lost"
        return CallFailure(
            f"MCP server {self.name!r} stopped during the call to {tool!r}: {reason}. "
            f"It will be restarted on the next call.",
            "mcp_server_crashed",
        )


def _progress_forwarder(report: ProgressCallback) -> ProgressFnT:
    async def forward(progress: float, total: float | None, message: str | None) -> None:
        fraction = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        report(f"{message} ({fraction})" if message else fraction)

    return forward
