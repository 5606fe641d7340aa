"""``McpServers``: every configured server started, discovered and exposed as producers.

::

    async with McpServers(load_mcp_config("mcp.json")) as servers:
        producers = servers.producers()      # one per tool: mcp__<server>__<tool>
        for name, error in servers.failures.items():
            print(f"{name} is unavailable: {error}")

Entering starts every server and lists its tools, in parallel. A server that cannot start
(command missing, crash, no answer within its start-up timeout) is logged, exposes no tools,
and is listed in ``failures`` with the reason; the others work normally. Servers the config
disables, or whose transport toolbatch lacks, are in ``failures`` too. Leaving stops every
server: stdin is closed, then the whole process group is terminated.

A call to a tool of a failed server does not meet "unknown tool": ``lookup`` answers every
``mcp__<server>__...`` name of a configured server. For a server that failed to start the
call first asks for a restart (at most one per ``restart_backoff_s``); if the server comes
up and offers the tool, the call runs, else it gets the server's failure (start-up
timeout, exit code and stderr tail, connection refused). A tool the config filters out
(``includeTools`` / ``excludeTools``) or one that requires MCP tasks
(``execution.taskSupport == "required"``, which toolbatch does not implement) is not
offered, and a call to it says why.

The tools are re-listed on every (re)start and on ``notifications/tools/list_changed``;
``producers()`` and ``lookup`` always reflect the latest list.

Start-up timeout, first match wins: the entry's ``startup_timeout_sec`` (Codex's name;
also ``startup_timeout_ms`` or Qwen Code's ``discoveryTimeoutMs``), ``start_timeout_s``,
the ``MCP_TIMEOUT`` environment variable (milliseconds, as Claude Code reads it), 30 s.
Call timeout: the entry's ``timeout`` (ms) or ``tool_timeout_sec``, ``default_timeout_s``,
``MCP_TOOL_TIMEOUT`` (ms), 60 s.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import MappingProxyType, TracebackType
from typing import Final, Literal, Self, TypeAlias

import anyio
import structlog

from toolbatch._core import ToolCall, ToolResult
from toolbatch.errors import ConfigError, McpError
from toolbatch.producers._base import (
    Producer,
    ProducerContext,
    ToolDeclaration,
)
from toolbatch.producers.mcp._config import McpConfig
from toolbatch.producers.mcp._connection import (
    DEFAULT_RESTART_BACKOFF_S,
    DEFAULT_START_TIMEOUT_S,
    McpConnection,
)
from toolbatch.producers.mcp._stdio import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_STDIN_CLOSE_GRACE_S,
    shutdown_s,
)
from toolbatch.producers.mcp._tools import McpToolProducer, mcp_tool_name, server_prefix
from toolbatch.producers.mcp._transform import (
    DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    DEFAULT_PREVIEW_CHARS,
)

__all__ = [
    "DEFAULT_MCP_TIMEOUT_S",
    "MCP_TIMEOUT_ENV",
    "MCP_TOOL_TIMEOUT_ENV",
    "McpServerStatus",
    "McpServers",
]

log = structlog.get_logger("toolbatch.mcp")

McpServerStatus: TypeAlias = Literal["pending", "connected", "failed", "disabled"]
"""A configured server's status (Claude Code's ``system/init`` ``mcp_servers`` words)."""

DEFAULT_MCP_TIMEOUT_S: Final = 60.0
"""The call timeout of a server whose entry sets no ``timeout``."""
MCP_TIMEOUT_ENV: Final = "MCP_TIMEOUT"
"""Start-up timeout in milliseconds, as Claude Code reads it (ecosystem-2.md 3.1)."""
MCP_TOOL_TIMEOUT_ENV: Final = "MCP_TOOL_TIMEOUT"
"""Default call timeout in milliseconds, as Claude Code reads it."""


class UnavailableToolProducer:
    """A tool name of a configured server that offers no such tool right now.

    Its ``run`` says why (the server's start-up failure, a disabled server, a filtered or
    task-only tool). For a server that failed to start it first tries a restart (bounded by
    the connection's back-off): a server that comes up and offers the tool runs the call.
    """

    def __init__(self, servers: McpServers, name: str, server: str, reason: str) -> None:
        self._servers = servers
        self._server = server
        self._reason = reason
        # A server still starting: its whole-server trust already applies (the permission
        # gate sees this declaration before the call waits for the server).
        connection = servers._connections.get(server)
        trusted = connection is not None and connection.config.trust
        self._declaration = ToolDeclaration(name=name, description=reason, trusted=trusted)

    @property
    def declaration(self) -> ToolDeclaration:
        """The called name, described by the reason it is unavailable."""
        return self._declaration

    @property
    def server(self) -> str:
        """The configured server the name belongs to."""
        return self._server

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Wait for a server still starting; retry a failed server once; else answer with
        the reason."""
        servers = self._servers
        if servers.starting(self._server):
            context.progress(f"connecting to {self._server}")
            context.log.info("mcp.waiting_for_server", server=self._server)
            await servers.wait_started(self._server)
            producer = servers.live_producer(call.name)
            if producer is not None:
                return await producer.run(call, context)
        reason = await self._servers.revive(self._server, call.name)
        if reason is None:
            producer = self._servers.live_producer(call.name)
            if producer is not None:
                return await producer.run(call, context)
            reason = self._servers.unavailable_reason(self._server, call.name)
        context.log.info("mcp.tool_unavailable", server=self._server, reason=reason)
        failed = ToolResult.failure(reason, type="mcp_server_unavailable")
        return failed.model_copy(update={"persisted_output_files": ()})


def _check_positive(option: str, value: float, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{option} must be a positive number of {unit}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{option} must be finite, got {value!r}")


def _check_seconds(option: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ConfigError(
            f"{option} must be a finite number of seconds, 0 or more, got {value!r}; "
            f"leave it out for the default"
        )


class McpServers:
    """Every server of an ``McpConfig``, as an async context manager (see module docstring).

    Args:
        config: the validated ``mcpServers`` document (``load_mcp_config``).
        default_timeout_s: the call timeout of a server whose entry sets no ``timeout``.
        start_timeout_s: how long each server has to answer ``initialize`` and
            ``tools/list`` (``npx`` fetching a package the first time can need a minute).
        large_output_trigger_chars: text parts longer than this are persisted and previewed.
        preview_chars: how much of such a part the model sees.
        max_message_bytes: the largest message accepted from a server: a stdio line, one
            SSE event or one HTTP JSON body (``_limits.py``).
        wait_for_start: whether entering waits until every server has started or failed
            (``True``), or returns at once while they start in the background (``False``,
            what ``ToolScheduler`` does): each server's tools appear when it is ready, a
            call to a server still starting waits for that server only (``lookup``),
            and ``wait_started()`` waits for them all.
        restart_backoff_s: after a server's (re)start failed, calls to it get that failure
            for this long before one of them tries again (0: every call tries).
        stdin_close_grace_s: how long a started stdio server may take to exit by itself
            once its stdin is closed (on leaving, or after a lost connection), before its
            process group gets SIGTERM.
    """

    def __init__(
        self,
        config: McpConfig,
        *,
        default_timeout_s: float | None = None,
        start_timeout_s: float | None = None,
        large_output_trigger_chars: int = DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        wait_for_start: bool = True,
        restart_backoff_s: float = DEFAULT_RESTART_BACKOFF_S,
        stdin_close_grace_s: float = DEFAULT_STDIN_CLOSE_GRACE_S,
    ) -> None:
        if not isinstance(config, McpConfig):
            raise ConfigError(
                f"McpServers takes an McpConfig, got {type(config).__name__}; "
                f"build one with load_mcp_config(...)"
            )
        if default_timeout_s is None:
            default_timeout_s = _env_seconds(MCP_TOOL_TIMEOUT_ENV, DEFAULT_MCP_TIMEOUT_S)
        if start_timeout_s is not None:
            source = (
                "set by --mcp-startup-timeout (toolbatch) or "
                "SchedulerConfig(mcp_startup_timeout=...)"
            )
        elif os.environ.get(MCP_TIMEOUT_ENV, "").strip():
            start_timeout_s = _env_seconds(MCP_TIMEOUT_ENV, DEFAULT_START_TIMEOUT_S)
            source = f"set by {MCP_TIMEOUT_ENV}={os.environ[MCP_TIMEOUT_ENV].strip()} ms"
        else:
            start_timeout_s = DEFAULT_START_TIMEOUT_S
            source = "the default"
        _check_positive("default_timeout_s", default_timeout_s, "seconds")
        _check_positive("start_timeout_s", start_timeout_s, "seconds")
        _check_positive("large_output_trigger_chars", large_output_trigger_chars, "characters")
        _check_positive("preview_chars", preview_chars, "characters")
        _check_positive("max_message_bytes", max_message_bytes, "bytes")
        _check_seconds("restart_backoff_s", restart_backoff_s)
        _check_seconds("stdin_close_grace_s", stdin_close_grace_s)
        self._stdin_close_grace_s = stdin_close_grace_s
        self.config = config
        self.start_timeout_s = start_timeout_s
        self._trigger_chars = large_output_trigger_chars
        self._preview_chars = preview_chars
        self._connections = {
            name: McpConnection(
                name,
                entry,
                default_timeout_s=default_timeout_s,
                start_timeout_s=start_timeout_s,
                max_message_bytes=max_message_bytes,
                on_tools_changed=self._tools_changed,
                start_timeout_source=source,
                restart_backoff_s=restart_backoff_s,
                stdin_close_grace_s=stdin_close_grace_s,
            )
            for name, entry in config.servers.items()
        }
        configured = (*config.servers, *config.unavailable)
        self._prefixes = sorted(
            ((server_prefix(name), name) for name in configured),
            key=lambda item: -len(item[0]),
        )
        self._producers: dict[str, McpToolProducer] = {}
        self._hidden: dict[str, str] = {}
        self._failures: dict[str, McpError] = {
            name: McpError(reason, server=name) for name, reason in config.unavailable.items()
        }
        self._stack: AsyncExitStack | None = None
        self._wait_for_start = wait_for_start
        self._closing = False
        self._entered = False
        self._collected = False
        self._version = 0
        self._changed: anyio.Event | None = None

    @property
    def failures(self) -> Mapping[str, McpError]:
        """The servers that are not running, by name, with why (read-only): those that could
        not start (until a later call restarts them), disabled ones, unsupported ones."""
        return MappingProxyType(self._failures)

    @property
    def server_names(self) -> tuple[str, ...]:
        """Every configured server, in document order."""
        return tuple(self._connections)

    def statuses(self) -> dict[str, McpServerStatus]:
        """Each configured server's status by name, in document order: ``pending`` while
        it starts, ``connected``, ``failed`` (it could not start, or stopped and could not
        restart), ``disabled`` (the config does not let it start: disabled, or a transport
        toolbatch lacks)."""
        statuses: dict[str, McpServerStatus] = {}
        for name, connection in self._connections.items():
            if connection.starting:
                statuses[name] = "pending"
            elif name in self._failures or connection.failure is not None:
                statuses[name] = "failed"
            else:
                statuses[name] = "connected"
        for name in self.config.unavailable:
            statuses[name] = "disabled"
        return statuses

    def starting(self, server: str) -> bool:
        """Whether ``server`` is starting (or restarting) now."""
        connection = self._connections.get(server)
        return connection is not None and connection.starting

    async def wait_started(self, server: str | None = None) -> None:
        """Wait until ``server`` (default: every server) has started or failed; each
        start-up is bounded by its own start-up timeout."""
        connections = (
            list(self._connections.values())
            if server is None
            else [self._connections[server]]
            if server in self._connections
            else []
        )
        for connection in connections:
            await connection.wait_started()

    def producers(self) -> list[Producer]:
        """One producer per discovered tool, servers in document order, tools as listed."""
        producers: list[Producer] = [*self._producers.values()]
        return producers

    def producer(self, name: str) -> McpToolProducer:
        """The producer exposed as ``name`` (``mcp__<server>__<tool>``).

        Raises:
            KeyError: no started server exposes that tool.
        """
        try:
            return self._producers[name]
        except KeyError:
            raise KeyError(
                f"no MCP tool is exposed as {name!r}; the tools are {sorted(self._producers)!r}"
            ) from None

    @property
    def tools_version(self) -> int:
        """Counts the changes of the offered tools (re-lists, restarts, revived servers)."""
        return self._version

    async def tools_changed(self, *, after: int) -> int:
        """Wait until the offered tools change past version ``after``; the new version.

        A runtime that shows the model the tool list can wait on this to refresh it.
        """
        while self._version <= after:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
        return self._version

    def live_producer(self, name: str) -> McpToolProducer | None:
        """The producer of an offered tool, or ``None``."""
        return self._producers.get(name)

    def lookup(self, name: str) -> Producer | None:
        """What answers a call to ``name``: the tool's producer, or, for a name under a
        configured server that does not offer it now, a producer that says why (and retries
        a server that failed to start). ``None`` for names of no configured server."""
        producer = self._producers.get(name)
        if producer is not None:
            return producer
        server = self._server_of(name)
        if server is None:
            return None
        return UnavailableToolProducer(self, name, server, self.unavailable_reason(server, name))

    def unavailable_reason(self, server: str, name: str) -> str:
        """Why ``name`` of ``server`` cannot be called now, for the model."""
        failure = self._failures.get(server)
        if failure is not None:
            return f"{failure}; its tools are unavailable (the call to {name!r} was not run)"
        hidden = self._hidden.get(name)
        if hidden is not None:
            return hidden
        connection = self._connections.get(server)
        if connection is not None and connection.failure is not None:
            return f"{connection.failure}; the call to {name!r} was not run"
        offered = sorted(n for n, p in self._producers.items() if p.server == server)
        return (
            f"MCP server {server!r} offers no tool {name!r}; its tools are "
            f"{', '.join(offered) or 'none'}"
        )

    async def revive(self, server: str, name: str) -> str | None:
        """Restart ``server`` if it failed to start (within its back-off); ``None`` when it
        now runs, else why not."""
        connection = self._connections.get(server)
        if connection is None:  # disabled or unsupported: nothing to start
            return self.unavailable_reason(server, name)
        if server not in self._failures and connection.failure is None:
            return None
        outcome = await connection.ensure_running()
        if outcome is not None:
            return f"{outcome}; its tools are unavailable (the call to {name!r} was not run)"
        self._failures.pop(server, None)
        return None

    def _server_of(self, name: str) -> str | None:
        for prefix, server in self._prefixes:
            if name.startswith(prefix):
                return server
        return None

    def connection(self, server: str) -> McpConnection:
        """The connection of ``server`` (its pid, restarts and tools, for diagnostics)."""
        return self._connections[server]

    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("an McpServers can be entered only once; make a new one")
        self._entered = True
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            tg = await stack.enter_async_context(anyio.create_task_group())
            for connection in self._connections.values():
                await tg.start(connection.supervise)
            if self._wait_for_start:
                # Each start-up bounds itself; this is a backstop against a wedged shutdown.
                # (twice the start-up: an ``auto`` HTTP entry may try two transports).
                longest = max((c.start_timeout_s for c in self._connections.values()), default=0.0)
                with anyio.move_on_after(2 * longest + shutdown_s(self._stdin_close_grace_s) + 5):
                    for connection in self._connections.values():
                        await connection.wait_started()
                self._collect()
            else:
                self._collected = True  # each server's tools join as it lists them
                self._rebuild()
                for name, connection in self._connections.items():
                    tg.start_soon(self._settle, name, connection)
        except BaseException:
            self._close_connections()
            await stack.__aexit__(None, None, None)
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._closing = True
        still_starting = [name for name, c in self._connections.items() if c.starting]
        if still_starting:
            log.info("mcp.servers_stopped_starting", servers=still_starting)
        self._close_connections()
        stack, self._stack = self._stack, None
        if stack is not None:
            # The body's exception is not passed on: the task group would wrap it in an
            # ExceptionGroup; it propagates unchanged once the servers are stopped.
            await stack.__aexit__(None, None, None)
        log.debug("mcp.servers_stopped", servers=len(self._connections))

    def _close_connections(self) -> None:
        for connection in self._connections.values():
            connection.close()

    def _collect(self) -> None:
        for name, connection in self._connections.items():
            failure = connection.failure
            if failure is not None or connection.server_info is None:
                self._failures[name] = failure or McpError(
                    f"MCP server {name!r} did not start in time", server=name
                )
        self._collected = True
        self._rebuild()
        log.info(
            "mcp.servers_started",
            servers=len(self._connections),
            tools=len(self._producers),
            failed=sorted(self._failures),
        )

    async def _settle(self, name: str, connection: McpConnection) -> None:
        """A server started in the background: note its failure (once) when it fails."""
        await connection.wait_started()
        if self._closing:
            return
        failure = connection.failure
        if failure is not None or connection.server_info is None:
            self._failures[name] = failure or McpError(
                f"MCP server {name!r} did not start", server=name
            )
            self._rebuild()

    def _tools_changed(self, server: str) -> None:
        self._failures.pop(server, None)
        if self._collected:  # before that, _collect builds everything once
            self._rebuild()

    def _rebuild(self) -> None:
        """Producers from every connection's latest tool list, filtered, names unique."""
        producers: dict[str, McpToolProducer] = {}
        hidden: dict[str, str] = {}
        for name, connection in self._connections.items():
            if name in self._failures:
                continue
            for tool in connection.tools:
                exposed = mcp_tool_name(name, tool.name)
                if not connection.config.offers(tool.name):
                    hidden[exposed] = (
                        f"MCP tool {tool.name!r} of server {name!r} is not offered: the MCP "
                        f"config's includeTools/excludeTools leave it out"
                    )
                    continue
                execution = tool.execution
                if execution is not None and execution.task_support == "required":
                    hidden[exposed] = (
                        f"MCP tool {tool.name!r} of server {name!r} can only run as an MCP "
                        f"task (execution.taskSupport is 'required'), which toolbatch does "
                        f"not support"
                    )
                    continue
                if exposed in producers:
                    log.warning(
                        "mcp.duplicate_tool_name",
                        server=name,
                        tool=tool.name,
                        exposed=exposed,
                        kept=producers[exposed].tool_name,
                    )
                    continue
                producers[exposed] = McpToolProducer(
                    connection,
                    tool,
                    name=exposed,
                    trigger_chars=self._trigger_chars,
                    preview_chars=self._preview_chars,
                )
        if hidden.keys() - self._hidden.keys():
            log.info("mcp.tools_not_offered", tools=sorted(hidden.keys() - self._hidden.keys()))
        self._producers = producers
        self._hidden = hidden
        self._version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None


def _env_seconds(variable: str, default: float) -> float:
    """A millisecond environment variable in seconds (``default`` when unset)."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ConfigError(
            f"{variable} must be a positive number of milliseconds, got {text!r}; "
            f"e.g. {variable}=60000 for a minute, or unset it for {default:g} s"
        )
    return value / 1000
