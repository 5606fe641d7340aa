"""toolbatch: a bounded, concurrent tool runtime for coding agents.

It runs one model turn's batch of tool calls (shell commands, MCP tools, custom Python
tools) concurrently, returns the responses in the model's call order, and guarantees that
what goes back to the model, what is recorded for resume and what hooks see are the same
bounded response.
"""

from toolbatch._core import (
    BatchObserver,
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
    ToolDeclaration,
    ToolFailure,
    ToolResult,
    Turn,
    parts_adapter,
)
from toolbatch.artifacts import ArtifactStore, ArtifactStream
from toolbatch.errors import (
    ArtifactCapExceeded,
    ArtifactError,
    ArtifactWriteError,
    ConfigError,
    McpConfigError,
    McpError,
    RecorderError,
    SessionHostError,
    ToolbatchError,
    ToolRegistrationError,
    TurnAlreadyCompleted,
)
from toolbatch.logs import configure_logging
from toolbatch.producers import FunctionTool, Producer, ProducerContext, tool
from toolbatch.recorder import JsonlRecorder, RecordedTurn, load_session
from toolbatch.scheduler import (
    PendingTurn,
    Registry,
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactCapExceeded",
    "ArtifactError",
    "ArtifactStore",
    "ArtifactStream",
    "ArtifactWriteError",
    "BatchObserver",
    "ConfigError",
    "FileData",
    "FileDataPart",
    "FunctionResponse",
    "FunctionResponsePart",
    "FunctionTool",
    "InlineData",
    "InlineDataPart",
    "JsonlRecorder",
    "McpConfigError",
    "McpError",
    "Part",
    "PendingTurn",
    "Producer",
    "ProducerContext",
    "RecordedTurn",
    "RecorderError",
    "Registry",
    "ResponseStatus",
    "SchedulerConfig",
    "SessionHostError",
    "TextPart",
    "ToolCall",
    "ToolCallResponse",
    "ToolDeclaration",
    "ToolFailure",
    "ToolRegistrationError",
    "ToolResult",
    "ToolScheduler",
    "ToolbatchError",
    "Turn",
    "TurnAlreadyCompleted",
    "__version__",
    "configure_logging",
    "default_registry",
    "load_session",
    "parts_adapter",
    "tool",
]
