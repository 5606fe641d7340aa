"""Claude Code's permission rules (``allow`` / ``ask`` / ``deny``), matched per call.

Pure logic, no I/O: ``Permissions.decide(tool, args)`` gives the first matching rule, deny
before ask before allow, with Bash rules matched per subcommand. The scheduler's approval
step combines it with PreToolUse hooks and the ``approve`` callback.
"""

from toolbatch.permissions._bash import SAFE_ENV_ASSIGNMENTS, Subcommand, split_command
from toolbatch.permissions._rules import (
    BASH_TOOL_ALIAS,
    NO_RULE,
    SHELL_TOOL,
    PermissionBehavior,
    PermissionDecision,
    PermissionMode,
    PermissionRule,
    Permissions,
    claude_tool_names,
)

__all__ = [
    "BASH_TOOL_ALIAS",
    "NO_RULE",
    "SAFE_ENV_ASSIGNMENTS",
    "SHELL_TOOL",
    "PermissionBehavior",
    "PermissionDecision",
    "PermissionMode",
    "PermissionRule",
    "Permissions",
    "Subcommand",
    "claude_tool_names",
    "split_command",
]
