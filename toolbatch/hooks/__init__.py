"""Hooks in Claude Code's format: PreToolUse, PostToolUse, PostToolUseFailure, PostToolBatch.

Python callables and external commands (``CommandHook``) that see a call before it runs, its
result after, and the bounded batch at the end; ``load_settings`` reads Claude Code settings
files (hooks, permissions, MCP servers). Details: ``toolbatch/hooks/README.md``.
"""

from toolbatch.hooks._bounds import (
    DEFAULT_HOOK_INPUT_CHARS as DEFAULT_HOOK_INPUT_CHARS,
    bound_object as bound_object,
    hook_input_chars as hook_input_chars,
)
from toolbatch.hooks._claude_names import (
    CLAUDE_CODE_ONLY_TOOLS as CLAUDE_CODE_ONLY_TOOLS,
    claude_tool_input as claude_tool_input,
    claude_tool_name as claude_tool_name,
    tool_args_from_claude as tool_args_from_claude,
)
from toolbatch.hooks._command import (
    BLOCK_EXIT_CODE as BLOCK_EXIT_CODE,
    DEFAULT_HOOK_TIMEOUT_S as DEFAULT_HOOK_TIMEOUT_S,
    DEFAULT_MAX_HOOK_OUTPUT_BYTES,
    MAX_HOOK_JSON_DEPTH,
    CommandHook,
    CommandOutcome as CommandOutcome,
    HookFailed as HookFailed,
    HookScriptChanged as HookScriptChanged,
)
from toolbatch.hooks._events import (
    MAX_HOOK_ERROR_CHARS as MAX_HOOK_ERROR_CHARS,
    HookEvent as HookEvent,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreToolUseInput,
    ToolHookInput as ToolHookInput,
    ToolHookOutput,
    parse_tool_hook_answer as parse_tool_hook_answer,
    truncate_middle as truncate_middle,
)
from toolbatch.hooks._models import (
    HookToolCall as HookToolCall,
    HookToolResponse as HookToolResponse,
    PostToolBatchHook as PostToolBatchHook,
    PostToolBatchInput,
    PostToolBatchOutput,
)
from toolbatch.hooks._runner import (
    HookOutcome as HookOutcome,
    apply_hook_output as apply_hook_output,
    build_hook_input as build_hook_input,
    run_post_tool_batch_hooks as run_post_tool_batch_hooks,
)
from toolbatch.hooks._settings import (
    SETTINGS_HOOK_TIMEOUT_S as SETTINGS_HOOK_TIMEOUT_S,
    Settings as Settings,
    SettingsDocument as SettingsDocument,
    SettingsSource as SettingsSource,
    load_settings,
)
from toolbatch.hooks._tool_hooks import (
    HOOK_EVENTS as HOOK_EVENTS,
    EventHook,
    PostToolUseOutcome as PostToolUseOutcome,
    PreToolUseOutcome as PreToolUseOutcome,
    ToolHookFunction as ToolHookFunction,
    note,
    run_post_tool_use_hooks as run_post_tool_use_hooks,
    run_pre_tool_use_hooks as run_pre_tool_use_hooks,
)

__all__ = [
    "DEFAULT_MAX_HOOK_OUTPUT_BYTES",
    "MAX_HOOK_JSON_DEPTH",
    "CommandHook",
    "EventHook",
    "PostToolBatchInput",
    "PostToolBatchOutput",
    "PostToolUseFailureInput",
    "PostToolUseInput",
    "PreToolUseInput",
    "ToolHookOutput",
    "load_settings",
    "note",
]
