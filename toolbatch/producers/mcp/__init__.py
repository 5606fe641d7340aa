"""MCP servers as producers: lenient config, stdio / streamable HTTP / SSE, restart on crash.

``load_mcp_config`` reads the ``mcpServers`` document (or VS Code's ``servers``) in the shapes
Claude Code, Qwen Code, Gemini CLI, Cursor, Cline and VS Code write; ``McpServers`` starts
every server, lists its tools and exposes each as a producer named ``mcp__<server>__<tool>``;
``McpServers.lookup`` also answers the names of servers that failed, with why.
"""

from toolbatch.producers.mcp._config import (
    MIN_CALL_TIMEOUT_MS,
    HttpServerConfig,
    HttpTransport,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    load_mcp_config,
    merge_mcp_configs,
)
from toolbatch.producers.mcp._connection import DEFAULT_START_TIMEOUT_S, McpConnection
from toolbatch.producers.mcp._scrub import scrub_surrogates
from toolbatch.producers.mcp._servers import (
    DEFAULT_MCP_TIMEOUT_S,
    MAX_TOOL_NAME_CHARS,
    MCP_TIMEOUT_ENV,
    MCP_TOOL_TIMEOUT_ENV,
    McpServers,
    McpServerStatus,
    McpToolProducer,
    UnavailableToolProducer,
    mcp_tool_name,
)
from toolbatch.producers.mcp._stdio import (
    DEFAULT_INHERITED_ENV_VARS,
    DEFAULT_MAX_MESSAGE_BYTES,
    StdioTransport,
    open_stdio_transport,
    server_environment,
)
from toolbatch.producers.mcp._transform import (
    DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    DEFAULT_PREVIEW_CHARS,
    transform_result,
)

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MCP_TIMEOUT_S",
    "DEFAULT_PREVIEW_CHARS",
    "DEFAULT_START_TIMEOUT_S",
    "MAX_TOOL_NAME_CHARS",
    "MCP_TIMEOUT_ENV",
    "MCP_TOOL_TIMEOUT_ENV",
    "MIN_CALL_TIMEOUT_MS",
    "HttpServerConfig",
    "HttpTransport",
    "McpConfig",
    "McpConnection",
    "McpServerStatus",
    "McpServers",
    "McpToolProducer",
    "ServerConfig",
    "StdioServerConfig",
    "StdioTransport",
    "UnavailableToolProducer",
    "load_mcp_config",
    "mcp_tool_name",
    "merge_mcp_configs",
    "open_stdio_transport",
    "scrub_surrogates",
    "server_environment",
    "transform_result",
]
