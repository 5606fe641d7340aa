"""MCP servers as producers: lenient config, stdio / streamable HTTP / SSE, restart on crash.

``load_mcp_config`` reads the ``mcpServers`` document (or VS Code's ``servers``) in the shapes
Claude Code, Qwen Code, Gemini CLI, Cursor, Cline and VS Code write; ``McpServers`` starts
every server, lists its tools and exposes each as a producer named ``mcp__<server>__<tool>``;
``McpServers.lookup`` also answers the names of servers that failed, with why.
"""

from toolbatch.producers.mcp._config import (
    MIN_CALL_TIMEOUT_MS as MIN_CALL_TIMEOUT_MS,
    HttpServerConfig as HttpServerConfig,
    HttpTransport as HttpTransport,
    McpConfig,
    ServerConfig as ServerConfig,
    StdioServerConfig as StdioServerConfig,
    load_mcp_config,
    merge_mcp_configs as merge_mcp_configs,
)
from toolbatch.producers.mcp._connection import (
    DEFAULT_RESTART_BACKOFF_S as DEFAULT_RESTART_BACKOFF_S,
    DEFAULT_START_TIMEOUT_S as DEFAULT_START_TIMEOUT_S,
    McpConnection as McpConnection,
)
from toolbatch.producers.mcp._scrub import scrub_surrogates as scrub_surrogates
from toolbatch.producers.mcp._servers import (
    DEFAULT_MCP_TIMEOUT_S as DEFAULT_MCP_TIMEOUT_S,
    MCP_TIMEOUT_ENV as MCP_TIMEOUT_ENV,
    MCP_TOOL_TIMEOUT_ENV as MCP_TOOL_TIMEOUT_ENV,
    McpServers,
    McpServerStatus as McpServerStatus,
    UnavailableToolProducer as UnavailableToolProducer,
)
from toolbatch.producers.mcp._stdio import (
    DEFAULT_INHERITED_ENV_VARS,
    DEFAULT_MAX_MESSAGE_BYTES as DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_STDIN_CLOSE_GRACE_S as DEFAULT_STDIN_CLOSE_GRACE_S,
    StdioTransport as StdioTransport,
    open_stdio_transport as open_stdio_transport,
    server_environment as server_environment,
)
from toolbatch.producers.mcp._tools import (
    MAX_TOOL_NAME_CHARS as MAX_TOOL_NAME_CHARS,
    McpToolProducer,
    mcp_tool_name as mcp_tool_name,
)
from toolbatch.producers.mcp._transform import (
    DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS as DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    DEFAULT_PREVIEW_CHARS as DEFAULT_PREVIEW_CHARS,
    transform_result as transform_result,
)

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "McpConfig",
    "McpServers",
    "McpToolProducer",
    "load_mcp_config",
]
