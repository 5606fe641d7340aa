"""Producers: the tools that answer calls (shell, MCP, custom) and their shared protocol."""

from toolbatch._environment import ShellEnvMode
from toolbatch._sandbox import (
    LandlockProbe,
    ProcessPolicy,
    SandboxMode,
    check_process_options,
    open_process_policy,
)

from ._base import (
    DEFAULT_CALL_TIMEOUT_S,
    UNWATCHED_PROGRESS,
    Producer,
    ProducerContext,
    ProgressCallback,
    ToolDeclaration,
)
from ._function import FunctionTool, tool, validate_tool_name
from ._generic import GENERIC_PREVIEW_CHARS, apply_output_threshold
from ._shell import ShellProducer

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "GENERIC_PREVIEW_CHARS",
    "UNWATCHED_PROGRESS",
    "FunctionTool",
    "LandlockProbe",
    "ProcessPolicy",
    "Producer",
    "ProducerContext",
    "ProgressCallback",
    "SandboxMode",
    "ShellEnvMode",
    "ShellProducer",
    "ToolDeclaration",
    "apply_output_threshold",
    "check_process_options",
    "open_process_policy",
    "tool",
    "validate_tool_name",
]
