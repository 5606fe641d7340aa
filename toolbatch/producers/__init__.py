"""Producers: the tools that answer calls (shell, MCP, custom) and their shared protocol."""

from toolbatch.producers._base import (
    DEFAULT_CALL_TIMEOUT_S,
    UNWATCHED_OUTPUT,
    UNWATCHED_PROGRESS,
    OutputCallback,
    Producer,
    ProducerContext,
    ProgressCallback,
    ToolDeclaration,
)
from toolbatch.producers._function import FunctionTool, tool, validate_tool_name
from toolbatch.producers._generic import GENERIC_PREVIEW_CHARS, apply_output_threshold
from toolbatch.producers._shell import ShellExit, ShellProducer, shell_exit
from toolbatch.sandbox import (
    LandlockProbe,
    ProcessPolicy,
    SandboxMode,
    ShellEnvMode,
    check_process_options,
    open_process_policy,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "GENERIC_PREVIEW_CHARS",
    "UNWATCHED_OUTPUT",
    "UNWATCHED_PROGRESS",
    "FunctionTool",
    "LandlockProbe",
    "OutputCallback",
    "ProcessPolicy",
    "Producer",
    "ProducerContext",
    "ProgressCallback",
    "SandboxMode",
    "ShellEnvMode",
    "ShellExit",
    "ShellProducer",
    "ToolDeclaration",
    "apply_output_threshold",
    "check_process_options",
    "open_process_policy",
    "shell_exit",
    "tool",
    "validate_tool_name",
]
