"""Claude Code's permission rules (``allow`` / ``ask`` / ``deny``) and modes, matched per call.

Pure logic, no I/O: ``Permissions.decide(tool, args)`` gives the first matching rule, deny
before ask before allow, with ``Bash(...)`` rules decided on the command's tree-sitter-bash
parse tree (``analyze_command``). The scheduler's approval step combines it with PreToolUse
hooks and the ``approve`` callback. Details: ``toolbatch/permissions/README.md``.
"""

from toolbatch.permissions._bash import (
    MAX_DEPTH,
    SAFE_ENV_ASSIGNMENTS,
    CommandAnalysis as CommandAnalysis,
    SimpleCommand as SimpleCommand,
    analyze_command,
)
from toolbatch.permissions._rules import (
    ACCEPT_EDITS_COMMANDS,
    BASH_TOOL_ALIAS as BASH_TOOL_ALIAS,
    NO_RULE as NO_RULE,
    PERMISSION_MODES as PERMISSION_MODES,
    SHELL_TOOL as SHELL_TOOL,
    PermissionBehavior as PermissionBehavior,
    PermissionDecision as PermissionDecision,
    PermissionMode as PermissionMode,
    PermissionRule,
    Permissions,
    claude_tool_names as claude_tool_names,
)

__all__ = [
    "ACCEPT_EDITS_COMMANDS",
    "MAX_DEPTH",
    "SAFE_ENV_ASSIGNMENTS",
    "PermissionRule",
    "Permissions",
    "analyze_command",
]
