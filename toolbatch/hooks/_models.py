"""PostToolBatch hook input and output, with Claude Code-compatible wire names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from toolbatch._core import ResponseStatus, ToolCallResponse

__all__ = [
    "HookToolCall",
    "HookToolResponse",
    "PostToolBatchHook",
    "PostToolBatchInput",
    "PostToolBatchOutput",
]


class HookToolResponse(BaseModel):
    """One call's bounded response as a hook sees it (never ``persisted_output_files``).

    ``parts`` are the wire dicts as the first finalization bounded them (the batch within
    its budget), except that inline binary data is replaced by a short placeholder. The
    model receives them, or a shorter cut of them when hook text has to fit the budget
    too. The unbounded ``display`` is never included, nor the raw error message (the
    bounded one is in the parts): a hook reads bounded, model-facing text only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    parts: list[dict[str, JsonValue]]
    error_type: str | None = None
    status: ResponseStatus = "success"
    content_length: int = 0


class HookToolCall(BaseModel):
    """One call of the batch: what was asked and what came back."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tool_name: str
    tool_input: dict[str, JsonValue]
    tool_use_id: str
    status: ResponseStatus
    tool_response: HookToolResponse


class PostToolBatchInput(BaseModel):
    """What a PostToolBatch hook receives (command hooks get it as JSON on stdin)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    hook_event_name: Literal["PostToolBatch"] = "PostToolBatch"
    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str = ""
    permission_mode: str = "default"
    tool_calls: list[HookToolCall]


class PostToolBatchOutput(BaseModel):
    """What a hook may ask for. None of it rewrites a tool's result (``replace`` aside).

    Attributes:
        additional_context: text for the model, sent as its own top-level text part after
            the batch's responses (bounded by the budget like any output, never attributed
            to a tool).
        stop: stop the agent after this batch: every result is kept and sent, the reason
            is added as a text part, ``Turn.stop_reason`` is set, and an agent loop ends
            the prompt instead of asking the model again.
        stop_reason: why (shown to the model and reported by the runtime).
        replace: call id to a replacement response, validated and bounded like any
            producer result. A replacement never inherits ``persisted_output_files``;
            whatever it carries there is dropped.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    additional_context: str | None = None
    stop: bool = False
    stop_reason: str | None = None
    replace: dict[str, ToolCallResponse] = Field(default_factory=dict)


PostToolBatchHook: TypeAlias = Callable[[PostToolBatchInput], Awaitable[PostToolBatchOutput | None]]
"""A Python hook: ``async def hook(batch) -> PostToolBatchOutput | None``."""
