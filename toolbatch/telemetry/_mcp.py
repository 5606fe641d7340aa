"""MCP tool calls: MCP attributes on the call's ``execute_tool`` span, and the MCP metric.

[MCP] (``docs/gen-ai/mcp.md``): an MCP tool call is compatible with the GenAI execute_tool
span, and an instrumentation that knows the tool execution is already traced adds the MCP
attributes to that span instead of making a second one. toolbatch does so:
``mcp.method.name = tools/call``, ``mcp.protocol.version`` (negotiated), ``mcp.session.id``
(the streamable-HTTP ``Mcp-Session-Id``; stdio has no session id), ``network.transport``
(``pipe`` for stdio, ``tcp`` for streamable HTTP), ``server.address`` / ``server.port`` for
HTTP, the server's name and the tool's own name (``toolbatch.mcp.server``,
``toolbatch.mcp.tool``), ``gen_ai.tool.type = extension``, and ``error.type = tool_error``
for a result with ``isError: true``. Each ``tools/call`` is also recorded in
``mcp.client.operation.duration`` (the conventions list ``mcp.session.id`` on spans, not on
the metric).

Not set, because the SDK's client does not expose it where toolbatch calls it:
``jsonrpc.request.id``. The MCP SDK's own client span
(``MCP send tools/call <tool>``, kind ``CLIENT``) and its ``params._meta`` injection run
under this span: with a global SDK configured it appears as the call span's child, and the
server's span as that one's.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final
from urllib.parse import urlsplit

from toolbatch.telemetry._bounds import bounded, metric_tool_name
from toolbatch.telemetry._names import (
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_NAME,
    MCP_METHOD_NAME,
    MCP_PROTOCOL_VERSION,
    MCP_SERVER,
    MCP_SESSION_ID,
    MCP_TOOL,
    MCP_TOOL_ERROR,
    NETWORK_TRANSPORT,
    OPERATION_EXECUTE_TOOL,
    SERVER_ADDRESS,
    SERVER_PORT,
    TOOL_TYPE_EXTENSION,
)
from toolbatch.telemetry._runtime import Otel, never_raises, recording
from toolbatch.telemetry._turn import CallTelemetry, current_call

__all__ = ["McpCallTelemetry", "trace_mcp_call"]

METHOD_TOOLS_CALL: Final = "tools/call"


class McpCallTelemetry:
    """One ``tools/call`` request, measured from :func:`trace_mcp_call` to :meth:`finished`."""

    __slots__ = ("_attributes", "_call", "_otel", "_start_ns")

    def __init__(self, otel: Otel, call: CallTelemetry | None, attributes: dict[str, Any]) -> None:
        self._otel = otel
        self._call = call
        self._attributes = attributes
        self._start_ns = time.time_ns()
        if call is not None:
            call.set_tool_type(TOOL_TYPE_EXTENSION)
            call.span.set_attributes(attributes)

    @never_raises
    def finished(self, error_type: str | None) -> None:
        """The request ended: ``error_type`` is ``None`` on success, ``tool_error`` for a
        result with ``isError``, else why it failed (``timeout``, ``mcp_error``, ...)."""
        duration_s = (time.time_ns() - self._start_ns) / 1e9
        metric = {
            MCP_METHOD_NAME: METHOD_TOOLS_CALL,
            GEN_AI_OPERATION_NAME: OPERATION_EXECUTE_TOOL,
            GEN_AI_TOOL_NAME: metric_tool_name(self._attributes[MCP_TOOL]),
            NETWORK_TRANSPORT: self._attributes[NETWORK_TRANSPORT],
        }
        for optional in (MCP_PROTOCOL_VERSION, SERVER_ADDRESS, SERVER_PORT):
            if optional in self._attributes:
                metric[optional] = self._attributes[optional]
        if error_type is not None:
            metric[ERROR_TYPE] = error_type
            if self._call is not None and error_type == MCP_TOOL_ERROR:
                self._call.error_type = MCP_TOOL_ERROR
        self._otel.meters().mcp_duration.record(duration_s, metric)


class _NullMcpCall:
    __slots__ = ()

    def finished(self, error_type: str | None) -> None:
        return None


_NULL_MCP_CALL: Final = _NullMcpCall()


def trace_mcp_call(
    server: str,
    tool: str,
    *,
    url: str | None = None,
    protocol_version: str | None = None,
    session_id: str | None = None,
) -> McpCallTelemetry | _NullMcpCall:
    """Start measuring a ``tools/call`` of ``tool`` on ``server``; call ``.finished(...)``.

    Args:
        server: the server's name in the ``mcpServers`` document.
        tool: the tool's name on the server.
        url: the streamable-HTTP endpoint (``None`` for stdio).
        protocol_version: the negotiated MCP protocol version, if known.
        session_id: the streamable-HTTP session id, if the server assigned one.
    """
    started = _start(server, tool, url, protocol_version, session_id)
    return _NULL_MCP_CALL if started is None else started


@never_raises
def _start(
    server: str,
    tool: str,
    url: str | None,
    protocol_version: str | None,
    session_id: str | None,
) -> McpCallTelemetry | _NullMcpCall:
    call = current_call()
    otel = call.turn.otel if call is not None else recording()
    if otel is None:
        return _NULL_MCP_CALL
    attributes: dict[str, Any] = {
        MCP_METHOD_NAME: METHOD_TOOLS_CALL,
        MCP_SERVER: bounded(server),
        MCP_TOOL: bounded(tool),
        # [MCP] network.transport: pipe for stdio, tcp for HTTP.
        NETWORK_TRANSPORT: "pipe" if url is None else "tcp",
    }
    if protocol_version:
        attributes[MCP_PROTOCOL_VERSION] = bounded(protocol_version)
    if session_id:  # [MCP] mcp.session.id: span only (a metric attribute of high cardinality)
        attributes[MCP_SESSION_ID] = bounded(session_id)
    if url is not None:
        parts = urlsplit(url)
        if parts.hostname:
            attributes[SERVER_ADDRESS] = bounded(parts.hostname)
            with contextlib.suppress(ValueError):  # a port that is not a number: left out
                attributes[SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    return McpCallTelemetry(otel, call, attributes)
