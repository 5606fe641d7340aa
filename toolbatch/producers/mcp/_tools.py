"""One tool of one MCP server as a ``Producer`` (``McpToolProducer``), and the name it is
exposed under (``mcp_tool_name``)."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Final

import anyio
import mcp_types as types

from toolbatch._core import ToolCall, ToolResult
from toolbatch.producers._base import UNWATCHED_PROGRESS, ProducerContext, ToolDeclaration
from toolbatch.producers.mcp._config import HttpServerConfig
from toolbatch.producers.mcp._connection import CallFailure, McpConnection
from toolbatch.producers.mcp._scrub import scrub_surrogates
from toolbatch.producers.mcp._transform import transform_result, transform_text_result
from toolbatch.telemetry import trace_mcp_call

__all__ = ["MAX_TOOL_NAME_CHARS", "McpToolProducer", "mcp_tool_name", "server_prefix"]

MAX_TOOL_NAME_CHARS: Final = 64
"""Model APIs reject longer function names; longer ones are shortened with a digest."""
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_-]")


def server_prefix(server: str) -> str:
    """``mcp__<server>__``: how every tool name of ``server`` starts (before shortening)."""
    return f"mcp__{_UNSAFE_NAME.sub('_', server)}__"


def mcp_tool_name(server: str, tool: str) -> str:
    """The name a server's tool is exposed under: ``mcp__<server>__<tool>``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``; a name over 64 characters keeps its
    first 55 and gets ``_`` plus 8 hex digits of its digest.
    """
    name = f"{server_prefix(server)}{_UNSAFE_NAME.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME_CHARS - 9]}_{digest}"


def _now() -> float:
    """``anyio.current_time()``: on asyncio, the running loop's clock read directly (anyio
    looks the backend up first, most of the 3 µs its call costs)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return anyio.current_time()


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
        self._url = (
            connection.config.url if isinstance(connection.config, HttpServerConfig) else None
        )
        self._trigger_chars = trigger_chars
        self._preview_chars = preview_chars
        self._declaration = ToolDeclaration(
            name=name,
            description=tool.description or tool.title or "",
            input_schema=tool.input_schema,
            needs_permission=False,
            trusted=connection.config.auto_approves(tool.name),
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
        progress = None if context.progress is UNWATCHED_PROGRESS else context.progress
        started = _now()
        connection = self._connection
        tool = self._tool.name
        traced = trace_mcp_call(
            connection.name,
            tool,
            url=self._url,
            protocol_version=connection.protocol_version,
            session_id=connection.session_id,
        )
        # ``args`` is the call's own dict: scrubbing copies only what it changes, and the
        # SDK validates the arguments into its request (a copy of ours would be a third).
        outcome = await connection.call_tool(
            tool,
            scrub_surrogates(call.args),
            timeout_s=timeout_s,
            progress=progress,
            started=started,
        )
        if isinstance(outcome, CallFailure):
            traced.finished(outcome.type)
            context.log.info("mcp.call_failed", server=connection.name, reason=outcome.type)
            failed = ToolResult.failure(outcome.message, type=outcome.type)
            return failed.model_copy(update={"persisted_output_files": ()})
        traced.finished("tool_error" if outcome.is_error else None)
        # Most results are one short text: converted without another coroutine.
        plain = transform_text_result(outcome, trigger_chars=self._trigger_chars)
        if plain is not None:
            return plain
        # The call's time covers saving its result: the persist ends by then.
        persist_by = started + timeout_s
        if context.deadline is not None:
            persist_by = min(persist_by, context.deadline)
        return await transform_result(
            outcome,
            call=call,
            store=context.store,
            trigger_chars=self._trigger_chars,
            preview_chars=self._preview_chars,
            persist_deadline=persist_by,
            log=context.log,
        )
