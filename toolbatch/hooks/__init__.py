"""PostToolBatch hooks: Python callables and external commands that see the bounded batch."""

from toolbatch.hooks._command import (
    BLOCK_EXIT_CODE,
    DEFAULT_HOOK_TIMEOUT_S,
    CommandHook,
    HookFailed,
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

__all__ = [
    "BLOCK_EXIT_CODE",
    "DEFAULT_HOOK_TIMEOUT_S",
    "CommandHook",
    "HookFailed",
    "HookOutcome",
    "HookToolCall",
    "HookToolResponse",
    "PostToolBatchHook",
    "PostToolBatchInput",
    "PostToolBatchOutput",
    "apply_hook_output",
    "build_hook_input",
    "run_post_tool_batch_hooks",
]
