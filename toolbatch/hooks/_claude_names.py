"""Claude Code's tool names and argument shapes, as hooks see them.

Hooks written for Claude Code test ``tool_name == "Bash"`` and read ``tool_input.command``
(code.claude.com/docs/en/hooks, "PreToolUse input", "Bash"), so every hook input names the
shell ``Bash`` and gives its arguments in Claude Code's shape:

* ``command`` and ``description`` as they are; ``timeout`` in **milliseconds** (toolbatch's
  is seconds); ``cwd`` (toolbatch's own argument, Claude Code's Bash has none) is kept when a
  call gives it, so an ``updatedInput`` that echoes the input keeps it.
* An ``updatedInput`` is read back the other way: ``timeout`` milliseconds to seconds, and a
  ``run_in_background: false`` (which Claude Code's examples echo) dropped.
* MCP tools are already ``mcp__<server>__<tool>``, and Python tools keep their own names.

Matchers and ``if`` rules match either name (``Bash`` and ``run_shell_command``), so a
settings file written for toolbatch's own name keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from pydantic import JsonValue

from toolbatch.permissions import BASH_TOOL_ALIAS, SHELL_TOOL

__all__ = [
    "CLAUDE_CODE_ONLY_TOOLS",
    "claude_tool_input",
    "claude_tool_name",
    "tool_args_from_claude",
    "unreachable_matcher_names",
]

CLAUDE_CODE_ONLY_TOOLS: Final = frozenset(
    {
        "Agent",
        "AskUserQuestion",
        "Edit",
        "ExitPlanMode",
        "Glob",
        "Grep",
        "LS",
        "MultiEdit",
        "NotebookEdit",
        "NotebookRead",
        "PowerShell",
        "Read",
        "Task",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
        "Write",
    }
)
"""Claude Code's built-in tools that toolbatch does not have: a hook matching only these
never runs here (unless a Python tool of that name is registered)."""

_MS_PER_S: Final = 1000


def claude_tool_name(name: str) -> str:
    """The name Claude Code gives the tool: ``Bash`` for the shell, else ``name``."""
    return BASH_TOOL_ALIAS if name == SHELL_TOOL else name


def claude_tool_input(name: str, args: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The call's arguments as Claude Code would give them to a hook."""
    if name != SHELL_TOOL:
        return dict(args)
    shown: dict[str, JsonValue] = {}
    for key, value in args.items():
        if key == "timeout" and isinstance(value, int | float) and not isinstance(value, bool):
            milliseconds = value * _MS_PER_S
            shown[key] = int(milliseconds) if float(milliseconds).is_integer() else milliseconds
        else:
            shown[key] = value
    return shown


def tool_args_from_claude(name: str, updated: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A hook's ``updatedInput`` as the tool's own arguments (the inverse of
    :func:`claude_tool_input`); anything else is left for the tool's validation to judge."""
    if name != SHELL_TOOL:
        return dict(updated)
    args: dict[str, JsonValue] = {}
    for key, value in updated.items():
        if key == "run_in_background" and value is False:
            continue
        if key == "timeout" and isinstance(value, int | float) and not isinstance(value, bool):
            args[key] = value / _MS_PER_S
        else:
            args[key] = value
    return args


def unreachable_matcher_names(names: Iterable[str]) -> list[str]:
    """The names of a literal matcher list that no call toolbatch runs can carry.

    Claude Code's own tools (``Edit``, ``Write``, ...) and a bare ``mcp__<server>`` (an
    exact name no tool has: Claude Code's documentation says to write ``mcp__<server>__.*``).
    """
    return [
        name
        for name in names
        if name in CLAUDE_CODE_ONLY_TOOLS or (name.startswith("mcp__") and "__" not in name[5:])
    ]
