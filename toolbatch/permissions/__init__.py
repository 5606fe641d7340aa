"""Claude Code's permission rules (``allow`` / ``ask`` / ``deny``) and modes, matched per call.

Pure logic, no I/O: ``Permissions.decide(tool, args)`` gives the first matching rule, deny
before ask before allow, with ``Bash(...)`` rules decided on the command's tree-sitter-bash
parse tree (``analyze_command``). The scheduler's approval step combines it with PreToolUse
hooks and the ``approve`` callback. Details: ``toolbatch/permissions/README.md``.
"""

from toolbatch.permissions._bash import (
    MAX_DEPTH,
    SAFE_ENV_ASSIGNMENTS,
    CommandAnalysis,
    SimpleCommand,
    analyze_command,
)
from toolbatch.permissions._rules import (
    ACCEPT_EDITS_COMMANDS,
    BASH_TOOL_ALIAS,
    NO_RULE,
    PERMISSION_MODES,
    SHELL_TOOL,
    PermissionBehavior,
    PermissionDecision,
    PermissionMode,
    PermissionRule,
    Permissions,
    claude_tool_names,
)

__all__ = [
    "ACCEPT_EDITS_COMMANDS",
    "BASH_TOOL_ALIAS",
    "MAX_DEPTH",
    "NO_RULE",
    "PERMISSION_MODES",
    "SAFE_ENV_ASSIGNMENTS",
    "SHELL_TOOL",
    "CommandAnalysis",
    "PermissionBehavior",
    "PermissionDecision",
    "PermissionMode",
    "PermissionRule",
    "Permissions",
    "SimpleCommand",
    "analyze_command",
    "claude_tool_names",
]
