"""MCP servers as producers: config, a linear-time stdio transport, restart on crash.

``load_mcp_config`` reads the ``mcpServers`` document; ``McpServers`` starts every server,
lists its tools and exposes each as a producer named ``mcp__<server>__<tool>``.
"""

from ._config import HttpServerConfig, McpConfig, ServerConfig, StdioServerConfig, load_mcp_config
from ._connection import DEFAULT_START_TIMEOUT_S, McpConnection
from ._scrub import scrub_surrogates
from ._servers import (
    DEFAULT_MCP_TIMEOUT_S,
    MAX_TOOL_NAME_CHARS,
    McpServers,
    McpToolProducer,
    mcp_tool_name,
)
from ._stdio import (
    DEFAULT_INHERITED_ENV_VARS,
    DEFAULT_MAX_MESSAGE_BYTES,
    StdioTransport,
    open_stdio_transport,
    server_environment,
)
from ._transform import DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS, DEFAULT_PREVIEW_CHARS, transform_result

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MCP_TIMEOUT_S",
    "DEFAULT_PREVIEW_CHARS",
    "DEFAULT_START_TIMEOUT_S",
    "MAX_TOOL_NAME_CHARS",
    "HttpServerConfig",
    "McpConfig",
    "McpConnection",
    "McpServers",
    "McpToolProducer",
    "ServerConfig",
    "StdioServerConfig",
    "StdioTransport",
    "load_mcp_config",
    "mcp_tool_name",
    "open_stdio_transport",
    "scrub_surrogates",
    "server_environment",
    "transform_result",
]
