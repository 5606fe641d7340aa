"""toolbatch: a bounded, concurrent tool runtime for coding agents.

It runs one model turn's batch of tool calls (shell commands, MCP tools, custom Python
tools) concurrently, returns the responses in the model's call order, and guarantees that
what goes back to the model, what is recorded for resume and what hooks see are the same
bounded response.
"""

from ._wire import (
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    ResponseStatus,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolFailure,
    ToolResult,
    Turn,
    parts_adapter,
)
from .artifacts import ArtifactStore, ArtifactStream
from .errors import (
    ArtifactCapExceeded,
    ArtifactError,
    ArtifactWriteError,
    ConfigError,
    McpConfigError,
    McpError,
    RecorderError,
    ToolbatchError,
    ToolRegistrationError,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactCapExceeded",
    "ArtifactError",
    "ArtifactStore",
    "ArtifactStream",
    "ArtifactWriteError",
    "ConfigError",
    "FileData",
    "FileDataPart",
    "FunctionResponse",
    "FunctionResponsePart",
    "InlineData",
    "InlineDataPart",
    "McpConfigError",
    "McpError",
    "Part",
    "RecorderError",
    "ResponseStatus",
    "TextPart",
    "ToolCall",
    "ToolCallResponse",
    "ToolFailure",
    "ToolRegistrationError",
    "ToolResult",
    "ToolbatchError",
    "Turn",
    "__version__",
    "parts_adapter",
]
