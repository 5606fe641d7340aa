"""Producers: the tools that answer calls (shell, MCP, custom) and their shared protocol."""

from ._base import (
    DEFAULT_CALL_TIMEOUT_S,
    Producer,
    ProducerContext,
    ProgressCallback,
    ToolDeclaration,
)
from ._function import FunctionTool, tool
from ._shell import ShellProducer

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "FunctionTool",
    "Producer",
    "ProducerContext",
    "ProgressCallback",
    "ShellProducer",
    "ToolDeclaration",
    "tool",
]
