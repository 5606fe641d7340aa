"""PostToolBatch hook input and output, with Claude Code-compatible wire names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from toolbatch._wire import ResponseStatus, ToolCallResponse

__all__ = [
    "HookToolCall",
    "HookToolResponse",
    "PostToolBatchHook",
    "PostToolBatchInput",
    "PostToolBatchOutput",
]


class HookToolResponse(BaseModel):
    """One call's bounded response as a hook sees it (never ``persisted_output_files``).

    ``parts`` are the wire dicts the model will receive, except that inline binary data is
    replaced by a short placeholder.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    parts: list[dict[str, JsonValue]]
    display: JsonValue = None
    error: str | None = None
    error_type: str | None = None
    status: ResponseStatus = "success"
    content_length: int = 0


class HookToolCall(BaseModel):
    """One call of the batch: what was asked and what came back."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_name: str
    tool_input: dict[str, JsonValue]
    tool_use_id: str
    status: ResponseStatus
    tool_response: HookToolResponse


class PostToolBatchInput(BaseModel):
    """What a PostToolBatch hook receives (command hooks get it as JSON on stdin)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hook_event_name: Literal["PostToolBatch"] = "PostToolBatch"
    session_id: str | None = None
    cwd: str = ""
    tool_calls: list[HookToolCall]


class PostToolBatchOutput(BaseModel):
    """What a hook may ask for.

    Attributes:
        additional_context: text appended to the last call's last function response.
        stop: turn the last call into an error response carrying ``stop_reason``.
        stop_reason: why the batch was stopped (shown to the model).
        replace: call id to a replacement response. A replacement never inherits
            ``persisted_output_files``; whatever it carries there is dropped.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    additional_context: str | None = None
    stop: bool = False
    stop_reason: str | None = None
    replace: dict[str, ToolCallResponse] = Field(default_factory=dict)


PostToolBatchHook: TypeAlias = Callable[[PostToolBatchInput], Awaitable[PostToolBatchOutput | None]]
"""A Python hook: ``async def hook(batch) -> PostToolBatchOutput | None``."""
