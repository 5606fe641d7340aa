"""``McpServers``: every configured server started, discovered and exposed as producers.

::

    async with McpServers(load_mcp_config("mcp.json")) as servers:
        producers = servers.producers()      # one per tool: mcp__<server>__<tool>
        for name, error in servers.failures.items():
            print(f"{name} is unavailable: {error}")

Entering starts every server and lists its tools, in parallel. A server that cannot start
(command missing, crash, no answer within ``start_timeout_s``) is logged, exposes no tools,
and is listed in ``failures`` with the reason; the others work normally. Leaving stops every
server: stdin is closed, then the whole process group is terminated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import MappingProxyType, TracebackType
from typing import Final, Self

import anyio
import mcp_types as types
import structlog

from toolbatch._wire import ToolCall, ToolResult
from toolbatch.errors import ConfigError, McpError
from toolbatch.producers._base import Producer, ProducerContext, ToolDeclaration
from toolbatch.producers.mcp._config import HttpServerConfig, McpConfig
from toolbatch.producers.mcp._connection import (
    DEFAULT_START_TIMEOUT_S,
    CallFailure,
    McpConnection,
)
from toolbatch.producers.mcp._scrub import scrub_surrogates
from toolbatch.producers.mcp._stdio import DEFAULT_MAX_MESSAGE_BYTES, SHUTDOWN_S
from toolbatch.producers.mcp._transform import (
    DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    DEFAULT_PREVIEW_CHARS,
    transform_result,
)
from toolbatch.telemetry import trace_mcp_call

__all__ = [
    "DEFAULT_MCP_TIMEOUT_S",
    "MAX_TOOL_NAME_CHARS",
    "McpServers",
    "McpToolProducer",
    "mcp_tool_name",
]

log = structlog.get_logger("toolbatch.mcp")

DEFAULT_MCP_TIMEOUT_S: Final = 60.0
"""The call timeout of a server whose entry sets no ``timeout``."""
MAX_TOOL_NAME_CHARS: Final = 64
"""Model APIs reject longer function names; longer ones are shortened with a digest."""
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")
_UNWATCHED_PROGRESS: Final = next(
    field.default for field in dataclasses.fields(ProducerContext) if field.name == "progress"
)


def mcp_tool_name(server: str, tool: str) -> str:
    """The name a server's tool is exposed under: ``mcp__<server>__<tool>``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``; a name over 64 characters keeps its
    first 55 and gets ``_`` plus 8 hex digits of its digest.
    """
    name = f"mcp__{_UNSAFE_NAME.sub('_', server)}__{_UNSAFE_NAME.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME_CHARS - 9]}_{digest}"


class McpToolProducer:
    """One tool of one MCP server, as a ``Producer``.

    ``run`` never raises for a server problem: timeouts, crashes and protocol errors become
    failed results whose message names the server and the tool.
    """

    def __init__(
        self,
        connection: McpConnection,
        tool: types.Tool,
        *,
        name: str,
        trigger_chars: int,
        preview_chars: int,
    ) -> None:
        self._connection = connection
        self._tool = tool
        self._trigger_chars = trigger_chars
        self._preview_chars = preview_chars
        self._declaration = ToolDeclaration(
            name=name,
            description=tool.description or tool.title or "",
            input_schema=tool.input_schema,
            needs_permission=False,
        )

    @property
    def declaration(self) -> ToolDeclaration:
        """The exposed name, the tool's description and its input schema."""
        return self._declaration

    @property
    def server(self) -> str:
        """The server's name in the ``mcpServers`` document."""
        return self._connection.name

    @property
    def tool_name(self) -> str:
        """The tool's name on its server."""
        return self._tool.name

    def __repr__(self) -> str:
        return f"<McpToolProducer {self._declaration.name!r}>"

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Call the tool with ``call.args`` and transform its result."""
        timeout_s = self._connection.timeout_s
        if context.timeout_s is not None:
            timeout_s = min(timeout_s, context.timeout_s)
        # Nobody listens to the default callback: skip the SDK's progress plumbing then.
        progress = None if context.progress is _UNWATCHED_PROGRESS else context.progress
        connection = self._connection
        url = connection.config.url if isinstance(connection.config, HttpServerConfig) else None
        traced = trace_mcp_call(
            self.server,
            self._tool.name,
            url=url,
            protocol_version=connection.protocol_version,
            session_id=connection.session_id,
        )
        outcome = await self._connection.call_tool(
            self._tool.name,
            scrub_surrogates(dict(call.args)),
            timeout_s=timeout_s,
            progress=progress,
        )
        traced.finished(
            outcome.type
            if isinstance(outcome, CallFailure)
            else "tool_error"
            if outcome.is_error
            else None
        )
        if isinstance(outcome, CallFailure):
            context.log.info("mcp.call_failed", server=self.server, reason=outcome.type)
            failed = ToolResult.failure(outcome.message, type=outcome.type)
            return failed.model_copy(update={"persisted_output_files": ()})
        return await transform_result(
            outcome,
            call=call,
            store=context.store,
            trigger_chars=self._trigger_chars,
            preview_chars=self._preview_chars,
            log=context.log,
        )


def _check_positive(option: str, value: float, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{option} must be a positive number of {unit}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{option} must be finite, got {value!r}")


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
    """

    def __init__(
        self,
        config: McpConfig,
        *,
        default_timeout_s: float = DEFAULT_MCP_TIMEOUT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        large_output_trigger_chars: int = DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if not isinstance(config, McpConfig):
            raise ConfigError(
                f"McpServers takes an McpConfig, got {type(config).__name__}; "
                f"build one with load_mcp_config(...)"
            )
        _check_positive("default_timeout_s", default_timeout_s, "seconds")
        _check_positive("start_timeout_s", start_timeout_s, "seconds")
        _check_positive("large_output_trigger_chars", large_output_trigger_chars, "characters")
        _check_positive("preview_chars", preview_chars, "characters")
        _check_positive("max_message_bytes", max_message_bytes, "bytes")
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
            )
            for name, entry in config.servers.items()
        }
        self._producers: dict[str, McpToolProducer] = {}
        self._failures: dict[str, McpError] = {}
        self._stack: AsyncExitStack | None = None
        self._entered = False

    @property
    def failures(self) -> Mapping[str, McpError]:
        """The servers that could not start, by name, with why (read-only)."""
        return MappingProxyType(self._failures)

    @property
    def server_names(self) -> tuple[str, ...]:
        """Every configured server, in document order."""
        return tuple(self._connections)

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
            # Each start-up bounds itself; this is a backstop against a wedged shutdown.
            with anyio.move_on_after(self.start_timeout_s + SHUTDOWN_S + 5):
                for connection in self._connections.values():
                    await connection.wait_started()
            self._collect()
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
                continue
            for tool in connection.tools:
                exposed = mcp_tool_name(name, tool.name)
                if exposed in self._producers:
                    log.warning(
                        "mcp.duplicate_tool_name",
                        server=name,
                        tool=tool.name,
                        exposed=exposed,
                        kept=self._producers[exposed].tool_name,
                    )
                    continue
                self._producers[exposed] = McpToolProducer(
                    connection,
                    tool,
                    name=exposed,
                    trigger_chars=self._trigger_chars,
                    preview_chars=self._preview_chars,
                )
        log.info(
            "mcp.servers_started",
            servers=len(self._connections),
            tools=len(self._producers),
            failed=sorted(self._failures),
        )
