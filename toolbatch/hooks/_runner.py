"""Running PostToolBatch hooks and applying what they ask for.

Hooks run concurrently on the same bounded input. Their answers are merged in the order the
hooks were configured: contexts are joined, any stop stops (reasons joined), later
replacements win. A hook that crashes, times out or answers garbage is logged and ignored.
Effects, in order: replacements, then stop (the last call becomes an error response
carrying the reason), then additional context (appended to the last call's last function
response: its output, else its error).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Final

import anyio
import structlog
from pydantic import JsonValue, ValidationError

from toolbatch._wire import (
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    function_response_part,
    parts_adapter,
)
from toolbatch.hooks._command import CommandHook, HookFailed
from toolbatch.hooks._models import (
    HookToolCall,
    HookToolResponse,
    PostToolBatchHook,
    PostToolBatchInput,
    PostToolBatchOutput,
)

__all__ = ["apply_hook_output", "build_hook_input", "run_post_tool_batch_hooks"]

log = structlog.get_logger("toolbatch.hooks")

CONTEXT_SEPARATOR: Final = "\n\n"
HOOK_STOPPED_ERROR_TYPE: Final = "hook_stopped"


def _placeholder(part: InlineDataPart) -> dict[str, JsonValue]:
    size = len(part.inline_data.data)
    return {
        "inlineData": {
            "mimeType": part.inline_data.mime_type,
            "data": f"<binary omitted: {size:,} base64 characters>",
        }
    }


def _hook_parts(parts: list[Part]) -> list[dict[str, JsonValue]]:
    out: list[dict[str, JsonValue]] = []
    for part in parts:
        if isinstance(part, InlineDataPart):
            out.append(_placeholder(part))
        else:
            out.append(part.model_dump(mode="json", by_alias=True, exclude_none=True))
    return out


def build_hook_input(
    responses: Sequence[ToolCallResponse],
    calls: Sequence[ToolCall | None],
    *,
    session_id: str | None = None,
    cwd: str | None = None,
) -> PostToolBatchInput:
    """The hook's view of the batch: each call with its bounded response.

    ``calls[i]`` is the call answered by ``responses[i]`` (``None`` when there was no valid
    call, e.g. a malformed one). ``persisted_output_files`` is never included.
    """
    tool_calls = []
    for response, call in zip(responses, calls, strict=True):
        tool_calls.append(
            HookToolCall.model_construct(
                tool_name=response.name,
                tool_input=dict(call.args) if call is not None else {},
                tool_use_id=response.call_id,
                status=response.status,
                tool_response=HookToolResponse.model_construct(
                    parts=_hook_parts(response.parts),
                    display=response.display,
                    error=response.error,
                    error_type=response.error_type,
                    status=response.status,
                    content_length=response.content_length,
                ),
            )
        )
    return PostToolBatchInput.model_construct(
        hook_event_name="PostToolBatch",
        session_id=session_id,
        cwd=cwd if cwd is not None else os.getcwd(),
        tool_calls=tool_calls,
    )


def _hook_label(hook: object) -> str:
    if isinstance(hook, CommandHook):
        return f"command:{hook.label}"
    return str(getattr(hook, "__qualname__", None) or getattr(hook, "__name__", repr(hook)))


async def _run_one(
    hook: PostToolBatchHook | CommandHook,
    batch: PostToolBatchInput,
    timeout_s: float,
    answers: list[PostToolBatchOutput | None],
    index: int,
) -> None:
    label = _hook_label(hook)
    try:
        if isinstance(hook, CommandHook):
            # A command hook enforces its own timeout (and kills its process group).
            raw: Any = await hook(batch)
        else:
            with anyio.fail_after(timeout_s):
                raw = await hook(batch)
        if raw is None or isinstance(raw, PostToolBatchOutput):
            answers[index] = raw
        else:
            answers[index] = PostToolBatchOutput.model_validate(raw)
    except TimeoutError:
        log.warning("hooks.timed_out", hook=label, timeout_s=timeout_s)
    except (HookFailed, ValidationError) as exc:
        log.warning("hooks.failed", hook=label, error=str(exc))
    except Exception as exc:  # a crashing hook never breaks the batch
        log.warning("hooks.crashed", hook=label, error=f"{type(exc).__name__}: {exc}")


def _merge(answers: Sequence[PostToolBatchOutput | None]) -> PostToolBatchOutput | None:
    given = [a for a in answers if a is not None]
    if not given:
        return None
    contexts = [a.additional_context for a in given if a.additional_context]
    stops = [a for a in given if a.stop]
    reasons = [a.stop_reason for a in stops if a.stop_reason]
    replace: dict[str, ToolCallResponse] = {}
    for answer in given:
        replace.update(answer.replace)
    return PostToolBatchOutput.model_construct(
        additional_context=CONTEXT_SEPARATOR.join(contexts) if contexts else None,
        stop=bool(stops),
        stop_reason="; ".join(reasons) if reasons else None,
        replace=replace,
    )


async def run_post_tool_batch_hooks(
    hooks: Sequence[PostToolBatchHook | CommandHook],
    batch: PostToolBatchInput,
    *,
    timeout_s: float,
) -> PostToolBatchOutput | None:
    """Run every hook on ``batch`` concurrently and merge their answers (``None``: no-op)."""
    if not hooks:
        return None
    answers: list[PostToolBatchOutput | None] = [None] * len(hooks)
    async with anyio.create_task_group() as tg:
        for index, hook in enumerate(hooks):
            tg.start_soon(_run_one, hook, batch, timeout_s, answers, index)
    merged = _merge(answers)
    if merged is not None:
        log.info(
            "hooks.answered",
            hooks=len(hooks),
            stop=merged.stop,
            context_chars=len(merged.additional_context or ""),
            replaced=len(merged.replace),
        )
    return merged


def _append_text(value: JsonValue, addition: str) -> str:
    if isinstance(value, str):
        return value + CONTEXT_SEPARATOR + addition if value else addition
    return json.dumps(value, ensure_ascii=False) + CONTEXT_SEPARATOR + addition


def _with_context(response: ToolCallResponse, context: str) -> ToolCallResponse:
    parts = list(response.parts)
    for index in range(len(parts) - 1, -1, -1):
        part = parts[index]
        if isinstance(part, FunctionResponsePart):
            body = dict(part.function_response.response)
            key = (
                "output" if "output" in body or not isinstance(body.get("error"), str) else "error"
            )
            body[key] = _append_text(body.get(key, ""), context)
            parts[index] = function_response_part(
                part.function_response.id, part.function_response.name, body
            )
            return response.with_parts(parts)
    parts.append(TextPart(text=context))
    return response.with_parts(parts)


def _stopped(response: ToolCallResponse, reason: str) -> ToolCallResponse:
    parts: list[Part] = [function_response_part(response.call_id, response.name, {"error": reason})]
    return response.model_copy(
        update={
            "parts": parts,
            "error": reason,
            "error_type": HOOK_STOPPED_ERROR_TYPE,
            "status": "error",
            "content_length": len(reason),
            "persisted_output_files": (),
        }
    )


def _replacement(original: ToolCallResponse, given: ToolCallResponse) -> ToolCallResponse:
    # Re-validate through the wire form: nothing internal survives (persisted_output_files
    # in particular), and malformed parts are rejected like any other hook answer.
    parts = parts_adapter.validate_python(
        parts_adapter.dump_python(given.parts, by_alias=True, exclude_none=True)
    )
    return ToolCallResponse.model_validate(
        {
            "call_id": original.call_id,
            "name": original.name,
            "parts": parts,
            "display": given.display,
            "error": given.error,
            "error_type": given.error_type,
            "status": given.status,
        }
    )


def apply_hook_output(
    responses: Sequence[ToolCallResponse], output: PostToolBatchOutput | None
) -> list[ToolCallResponse]:
    """The batch after the hooks' effects (the same objects where nothing changed)."""
    result = list(responses)
    if output is None or not result:
        return result
    for call_id, given in output.replace.items():
        for index, original in enumerate(result):
            if original.call_id == call_id and original.status != "duplicate":
                try:
                    result[index] = _replacement(original, given)
                except ValidationError as exc:
                    log.warning("hooks.bad_replacement", call_id=call_id, error=str(exc))
                break
        else:
            log.warning("hooks.unknown_replacement", call_id=call_id)
    if output.stop:
        reason = output.stop_reason or "Execution stopped by PostToolBatch hook"
        result[-1] = _stopped(result[-1], reason)
    if output.additional_context:
        result[-1] = _with_context(result[-1], output.additional_context)
    return result
