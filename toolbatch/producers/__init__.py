"""Producers: the tools that answer calls (shell, MCP, custom) and their shared protocol."""

from toolbatch.producers._base import (
    DEFAULT_CALL_TIMEOUT_S as DEFAULT_CALL_TIMEOUT_S,
    UNWATCHED_OUTPUT as UNWATCHED_OUTPUT,
    UNWATCHED_PROGRESS,
    OutputCallback as OutputCallback,
    Producer,
    ProducerContext,
    ProgressCallback as ProgressCallback,
    ToolDeclaration,
)
from toolbatch.producers._function import (
    FunctionTool as FunctionTool,
    tool,
    validate_tool_name as validate_tool_name,
)
from toolbatch.producers._generic import (
    GENERIC_PREVIEW_CHARS as GENERIC_PREVIEW_CHARS,
    apply_output_threshold as apply_output_threshold,
)
from toolbatch.producers._shell import ShellProducer
from toolbatch.producers._shell_result import without_exit_line as without_exit_line
from toolbatch.sandbox import (
    LandlockProbe as LandlockProbe,
    ProcessPolicy as ProcessPolicy,
    SandboxMode as SandboxMode,
    ShellEnvMode as ShellEnvMode,
    open_process_policy,
)

__all__ = [
    "UNWATCHED_PROGRESS",
    "Producer",
    "ProducerContext",
    "ShellProducer",
    "ToolDeclaration",
    "open_process_policy",
    "tool",
]
