"""Running PostToolBatch hooks and reading what they ask for.

Hooks run concurrently on the same bounded input. Their answers are merged in the order the
hooks were configured: contexts are joined, any stop stops (reasons joined), later
replacements win. A hook that crashes, times out or answers garbage is logged and ignored.
What they ask for never rewrites a tool's result: replacements (validated like any
producer result) are applied to their calls, and the context and the stop reason come back
as text for the turn pipeline to send as the batch's own top-level parts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import structlog
from pydantic import JsonValue, ValidationError

from toolbatch._core import (
    FunctionResponse,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    ToolCallResponse,
    parts_adapter,
)
from toolbatch.hooks._bounds import DEFAULT_HOOK_INPUT_CHARS, bound_json_each
from toolbatch.hooks._claude_names import claude_tool_input, claude_tool_name
from toolbatch.hooks._command import CommandHook, HookFailed
from toolbatch.hooks._models import (
    HookToolCall,
    HookToolResponse,
    PostToolBatchHook,
    PostToolBatchInput,
    PostToolBatchOutput,
)
from toolbatch.telemetry import trace_hook

__all__ = ["HookOutcome", "apply_hook_output", "build_hook_input", "run_post_tool_batch_hooks"]

log = structlog.get_logger("toolbatch.hooks")

CONTEXT_SEPARATOR: Final = "\n\n"
STOP_NOTE: Final = "A PostToolBatch hook stopped the agent after these tool results: "
"""How the stop reason is told to the model (its own text part, after the results)."""


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
    *,
    session_id: str | None = None,
    cwd: str | None = None,
    input_chars: int = DEFAULT_HOOK_INPUT_CHARS,
    transcript_path: str | None = None,
    permission_mode: str = "default",
) -> PostToolBatchInput:
    """The hook's view of the batch: each call with its bounded, model-facing response.

    ``tool_name`` and ``tool_input`` are Claude Code's (the shell is ``Bash``, its
    ``timeout`` in milliseconds; ``{}`` for a malformed call), all the arguments bounded
    together to ``input_chars`` (small ones whole, long strings cut with a marker); the
    response is its parts as bounded within the batch budget (inline binary replaced by a
    placeholder); the model gets them, or a shorter cut when hook text has to fit too.
    ``persisted_output_files`` and the unbounded ``display`` are never included.
    """
    arguments: list[JsonValue] = [
        claude_tool_input(response.name, response.call_args)
        if response.call_args is not None
        else {}
        for response in responses
    ]
    wholes = [
        f"call {response.call_id!r} as the model sent it, not saved" for response in responses
    ]
    bounded = bound_json_each(arguments, input_chars, what="the arguments", wholes=wholes)
    tool_calls = []
    for response, args in zip(responses, bounded, strict=True):
        tool_calls.append(
            HookToolCall.model_construct(
                tool_name=claude_tool_name(response.name),
                tool_input=args if isinstance(args, dict) else {"truncated": args},
                tool_use_id=response.call_id,
                status=response.status,
                tool_response=HookToolResponse.model_construct(
                    parts=_hook_parts(response.parts),
                    error_type=response.error_type,
                    status=response.status,
                    content_length=response.content_length,
                ),
            )
        )
    return PostToolBatchInput.model_construct(
        hook_event_name="PostToolBatch",
        session_id=session_id,
        transcript_path=transcript_path,
        cwd=cwd if cwd is not None else os.getcwd(),
        permission_mode=permission_mode,
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
    traced = trace_hook(
        "PostToolBatch", label, "command" if isinstance(hook, CommandHook) else "python"
    )
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
        traced.failed("timeout")
        log.warning("hooks.timed_out", hook=label, timeout_s=timeout_s)
    except (HookFailed, ValidationError) as exc:
        traced.failed(type(exc).__name__)
        log.warning("hooks.failed", hook=label, error=str(exc))
    except Exception as exc:  # a crashing hook never breaks the batch
        traced.failed(type(exc).__name__)
        log.warning("hooks.crashed", hook=label, error=f"{type(exc).__name__}: {exc}")
    finally:
        traced.end(answers[index])


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


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """What the hooks' merged answer does to a batch.

    Attributes:
        responses: the batch with replacements applied (the same objects elsewhere).
        context: text parts for the model, in order (each hook's context, then the stop
            note); never attached to a tool's response.
        stop_reason: set when a hook stopped the agent.
    """

    responses: list[ToolCallResponse]
    context: list[str] = field(default_factory=list)
    stop_reason: str | None = None


def _answering(original: ToolCallResponse, part: Part) -> Part:
    """``part`` with its functionResponse addressed to ``original``'s call.

    Hooks see the shell as ``Bash`` (Claude Code's name), so a hook that answers with the
    ``tool_name`` it was shown would otherwise pair its response with no call of the model's.
    """
    if not isinstance(part, FunctionResponsePart):
        return part
    answer = part.function_response
    if answer.id == original.call_id and answer.name == original.name:
        return part
    return FunctionResponsePart(
        function_response=FunctionResponse(
            id=original.call_id, name=original.name, response=answer.response
        )
    )


def _replacement(original: ToolCallResponse, given: ToolCallResponse) -> ToolCallResponse:
    # Re-validate through the wire form: nothing internal survives (persisted_output_files
    # in particular), and malformed parts are rejected like any other hook answer.
    parts = parts_adapter.validate_python(
        parts_adapter.dump_python(given.parts, by_alias=True, exclude_none=True)
    )
    replaced = ToolCallResponse.model_validate(
        {
            "call_id": original.call_id,
            "name": original.name,
            "parts": [_answering(original, part) for part in parts],
            "display": given.display,
            "error": given.error,
            "error_type": given.error_type,
            "status": given.status,
        }
    )
    return replaced.model_copy(update={"call_args": original.call_args})


def apply_hook_output(
    responses: Sequence[ToolCallResponse], output: PostToolBatchOutput | None
) -> HookOutcome:
    """What ``output`` does to the batch: replacements in place, context and stop beside it."""
    result = list(responses)
    if output is None:
        return HookOutcome(result)
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
    context = [output.additional_context] if output.additional_context else []
    stop_reason = None
    if output.stop:
        stop_reason = output.stop_reason or "stopped by a PostToolBatch hook"
        context.append(STOP_NOTE + stop_reason)
    return HookOutcome(result, context, stop_reason)
