"""toolbatch: a bounded, concurrent tool runtime for coding agents.

It runs one model turn's batch of tool calls (shell commands, MCP tools, custom Python
tools) concurrently, returns the responses in the model's call order, and guarantees that
what goes back to the model, what is recorded for resume and what hooks see are the same
bounded response.

Everything an embedder needs is importable from here, each name imported on first use: a
program that only runs batches never loads the model clients, and ``toolbatch run`` loads
only what running a batch needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from toolbatch.agent import AgentLoop, Message, Model, ModelReply
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

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "ArtifactCapExceeded": "toolbatch.errors",
    "ArtifactError": "toolbatch.errors",
    "ArtifactStore": "toolbatch.artifacts",
    "ArtifactStream": "toolbatch.artifacts",
    "ArtifactWriteError": "toolbatch.errors",
    "BatchObserver": "toolbatch._core",
    "CommandHook": "toolbatch.hooks",
    "ConfigError": "toolbatch.errors",
    "EventHook": "toolbatch.hooks",
    "FileData": "toolbatch._core",
    "FileDataPart": "toolbatch._core",
    "FunctionResponse": "toolbatch._core",
    "FunctionResponsePart": "toolbatch._core",
    "FunctionTool": "toolbatch.producers",
    "InlineData": "toolbatch._core",
    "InlineDataPart": "toolbatch._core",
    "JsonlRecorder": "toolbatch.recorder",
    "McpConfigError": "toolbatch.errors",
    "McpError": "toolbatch.errors",
    "ModelError": "toolbatch.errors",
    "Part": "toolbatch._core",
    "PendingTurn": "toolbatch.scheduler",
    "PostToolBatchInput": "toolbatch.hooks",
    "PostToolBatchOutput": "toolbatch.hooks",
    "Producer": "toolbatch.producers",
    "ProducerContext": "toolbatch.producers",
    "RecordedTurn": "toolbatch.recorder",
    "RecorderError": "toolbatch.errors",
    "Registry": "toolbatch.scheduler",
    "ResponseStatus": "toolbatch._core",
    "SchedulerConfig": "toolbatch.scheduler",
    "SessionHostError": "toolbatch.errors",
    "TextPart": "toolbatch._core",
    "ToolCall": "toolbatch._core",
    "ToolCallResponse": "toolbatch._core",
    "ToolDeclaration": "toolbatch._core",
    "ToolFailure": "toolbatch._core",
    "ToolRegistrationError": "toolbatch.errors",
    "ToolResult": "toolbatch._core",
    "ToolScheduler": "toolbatch.scheduler",
    "ToolbatchError": "toolbatch.errors",
    "Turn": "toolbatch._core",
    "TurnAlreadyCompleted": "toolbatch.errors",
    "configure_logging": "toolbatch.logs",
    "default_registry": "toolbatch.scheduler",
    "load_session": "toolbatch.recorder",
    "parts_adapter": "toolbatch._core",
    "tool": "toolbatch.producers",
    "AgentLoop": "toolbatch.agent",
    "Message": "toolbatch.agent",
    "Model": "toolbatch.agent",
    "ModelReply": "toolbatch.agent",
}
"""Where each public name lives: imported on first use (PEP 562), so a program that imports
one subpackage (``toolbatch.cli``, ``toolbatch.producers``) loads only what that needs, and
one that never touches the agent loop never loads the model clients."""


_SUBPACKAGES = frozenset(
    {
        "acp",
        "agent",
        "artifacts",
        "cli",
        "errors",
        "finalize",
        "hooks",
        "integrations",
        "logs",
        "permissions",
        "producers",
        "providers",
        "ray",
        "recorder",
        "sandbox",
        "scheduler",
        "service",
        "telemetry",
        "testing",
        "transports",
    }
)
"""``toolbatch.<subpackage>`` after a bare ``import toolbatch`` still works, as it did when
importing the package loaded them all."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"toolbatch.{name}")
    else:
        raise AttributeError(f"module 'toolbatch' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
