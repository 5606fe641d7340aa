"""toolbatch: a bounded, concurrent tool runtime for coding agents.

It runs one model turn's batch of tool calls (shell commands, MCP tools, custom Python
tools) concurrently, returns the responses in the model's call order, and guarantees that
what goes back to the model is within one budget and is exactly what is recorded for
resume; PostToolBatch hooks see each result bounded (the model may get a shorter cut of it
when hook text has to fit too).

Everything an embedder needs is importable from here; the agent loop's names
(``AgentLoop``, ``Message``, ``Model``, ``ModelReply``) are imported on first use, so a
program that only runs batches never loads the model clients.
"""

from typing import TYPE_CHECKING, Any

from toolbatch._core import (
    BatchObserver,
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    ResponseStatus as ResponseStatus,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolFailure as ToolFailure,
    ToolResult,
    Turn,
    parts_adapter as parts_adapter,
)
from toolbatch.artifacts import ArtifactStore, ArtifactStream as ArtifactStream
from toolbatch.errors import (
    ArtifactCapExceeded,
    ArtifactError,
    ArtifactWriteError,
    ConfigError,
    McpConfigError,
    McpError,
    ModelError,
    RecorderError,
    SessionHostError,
    ToolbatchError,
    ToolRegistrationError,
    TurnAlreadyCompleted,
)
from toolbatch.hooks import CommandHook, EventHook, PostToolBatchInput, PostToolBatchOutput
from toolbatch.logs import configure_logging
from toolbatch.producers import FunctionTool, Producer, ProducerContext, tool
from toolbatch.recorder import JsonlRecorder, RecordedTurn as RecordedTurn, load_session
from toolbatch.scheduler import (
    PendingTurn,
    Registry,
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)

if TYPE_CHECKING:
    from toolbatch.agent import AgentLoop, Message, Model, ModelReply

__version__ = "0.1.0"

_AGENT_NAMES = frozenset({"AgentLoop", "Message", "Model", "ModelReply"})


def __getattr__(name: str) -> Any:
    if name in _AGENT_NAMES:
        import toolbatch.agent

        value = getattr(toolbatch.agent, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'toolbatch' has no attribute {name!r}")


__all__ = [
    "AgentLoop",
    "ArtifactCapExceeded",
    "ArtifactError",
    "ArtifactStore",
    "ArtifactWriteError",
    "BatchObserver",
    "CommandHook",
    "ConfigError",
    "EventHook",
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
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "Part",
    "PendingTurn",
    "PostToolBatchInput",
    "PostToolBatchOutput",
    "Producer",
    "ProducerContext",
    "RecorderError",
    "Registry",
    "SchedulerConfig",
    "SessionHostError",
    "TextPart",
    "ToolCall",
    "ToolCallResponse",
    "ToolDeclaration",
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
    "tool",
]
