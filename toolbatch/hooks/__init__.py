"""Hooks in Claude Code's format: PreToolUse, PostToolUse, PostToolUseFailure, PostToolBatch.

Python callables and external commands (``CommandHook``) that see a call before it runs, its
result after, and the bounded batch at the end; ``load_settings`` reads Claude Code settings
files (hooks, permissions, MCP servers). Details: ``toolbatch/hooks/README.md``.
"""

from toolbatch.hooks._bounds import DEFAULT_HOOK_INPUT_CHARS, bound_object, hook_input_chars
from toolbatch.hooks._claude_names import (
    CLAUDE_CODE_ONLY_TOOLS,
    claude_tool_input,
    claude_tool_name,
    tool_args_from_claude,
)
from toolbatch.hooks._command import (
    BLOCK_EXIT_CODE,
    DEFAULT_HOOK_TIMEOUT_S,
    DEFAULT_MAX_HOOK_OUTPUT_BYTES,
    MAX_HOOK_JSON_DEPTH,
    CommandHook,
    CommandOutcome,
    HookFailed,
    HookScriptChanged,
)
from toolbatch.hooks._events import (
    MAX_HOOK_ERROR_CHARS,
    HookEvent,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreToolUseInput,
    ToolHookInput,
    ToolHookOutput,
    parse_tool_hook_answer,
    truncate_middle,
)
from toolbatch.hooks._models import (
    HookToolCall,
    HookToolResponse,
    PostToolBatchHook,
    PostToolBatchInput,
    PostToolBatchOutput,
)
from toolbatch.hooks._runner import (
    HookOutcome,
    apply_hook_output,
    build_hook_input,
    run_post_tool_batch_hooks,
)
from toolbatch.hooks._settings import (
    SETTINGS_HOOK_TIMEOUT_S,
    Settings,
    SettingsDocument,
    SettingsSource,
    load_settings,
)
from toolbatch.hooks._tool_hooks import (
    HOOK_EVENTS,
    EventHook,
    PostToolUseOutcome,
    PreToolUseOutcome,
    ToolHookFunction,
    note,
    run_post_tool_use_hooks,
    run_pre_tool_use_hooks,
)

__all__ = [
    "BLOCK_EXIT_CODE",
    "CLAUDE_CODE_ONLY_TOOLS",
    "DEFAULT_HOOK_INPUT_CHARS",
    "DEFAULT_HOOK_TIMEOUT_S",
    "DEFAULT_MAX_HOOK_OUTPUT_BYTES",
    "HOOK_EVENTS",
    "MAX_HOOK_ERROR_CHARS",
    "MAX_HOOK_JSON_DEPTH",
    "SETTINGS_HOOK_TIMEOUT_S",
    "CommandHook",
    "CommandOutcome",
    "EventHook",
    "HookEvent",
    "HookFailed",
    "HookOutcome",
    "HookScriptChanged",
    "HookToolCall",
    "HookToolResponse",
    "PostToolBatchHook",
    "PostToolBatchInput",
    "PostToolBatchOutput",
    "PostToolUseFailureInput",
    "PostToolUseInput",
    "PostToolUseOutcome",
    "PreToolUseInput",
    "PreToolUseOutcome",
    "Settings",
    "SettingsDocument",
    "SettingsSource",
    "ToolHookFunction",
    "ToolHookInput",
    "ToolHookOutput",
    "apply_hook_output",
    "bound_object",
    "build_hook_input",
    "claude_tool_input",
    "claude_tool_name",
    "hook_input_chars",
    "load_settings",
    "note",
    "parse_tool_hook_answer",
    "run_post_tool_batch_hooks",
    "run_post_tool_use_hooks",
    "run_pre_tool_use_hooks",
    "tool_args_from_claude",
    "truncate_middle",
]
