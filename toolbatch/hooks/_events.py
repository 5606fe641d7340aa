"""Per-call hook events: PreToolUse, PostToolUse and PostToolUseFailure, Claude Code's shapes.

Inputs carry Claude Code's field names (code.claude.com/docs/en/hooks, "Common input
fields", "PreToolUse input", "PostToolUse input", "PostToolUseFailure input"):
``session_id``, ``transcript_path`` (the recording's path, ``None`` when the session is not
recorded), ``cwd``, ``permission_mode``, ``hook_event_name``, ``tool_name``, ``tool_input``,
``tool_use_id``; PostToolUse adds ``tool_response`` and ``duration_ms``; PostToolUseFailure
adds ``error``, ``is_interrupt`` and ``duration_ms``.

``tool_name`` and ``tool_input`` are Claude Code's (see ``_claude_names``): the shell is
``Bash`` with ``command``, ``description`` and ``timeout`` in milliseconds; MCP tools are
``mcp__<server>__<tool>``. For the shell, ``tool_response`` is Claude Code's Bash output
object: ``stdout`` (the command's output without toolbatch's exit line; stdout and stderr
share one pipe, so both are here, interleaved as a terminal shows them), ``stderr`` (``""``
for that reason), ``interrupted`` and ``isImage``. A command that exits non-zero fires
PostToolUseFailure with ``error`` = ``Exit code N`` and the output, as Claude Code does.
Other tools' ``tool_response`` is the function response body as the tool returned it
(``{"output": ...}``), before the batch budget: the model may get a shorter cut of it.

Answers are read from Claude Code's JSON (a command hook's stdout, or the dict a Python hook
returns) into one :class:`ToolHookOutput`, or returned as that model directly.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from toolbatch.hooks._command import HookFailed

__all__ = [
    "MAX_HOOK_ERROR_CHARS",
    "HookEvent",
    "PermissionDecisionValue",
    "PostToolUseFailureInput",
    "PostToolUseInput",
    "PreToolUseInput",
    "ToolHookInput",
    "ToolHookOutput",
    "parse_tool_hook_answer",
]

HookEvent: TypeAlias = Literal["PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch"]
"""The events toolbatch fires."""
PermissionDecisionValue: TypeAlias = Literal["allow", "deny", "ask", "defer"]
MAX_HOOK_ERROR_CHARS: Final = 10_000
"""PostToolUseFailure's ``error`` is middle-truncated past this (as Claude Code does)."""

_INPUT_CONFIG: Final = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class _ToolEventInput(BaseModel):
    model_config = _INPUT_CONFIG

    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str = ""
    permission_mode: str = "default"
    tool_name: str
    tool_input: dict[str, JsonValue]
    tool_use_id: str


class PreToolUseInput(_ToolEventInput):
    """What a PreToolUse hook receives, before the call runs."""

    hook_event_name: Literal["PreToolUse"] = "PreToolUse"


class PostToolUseInput(_ToolEventInput):
    """What a PostToolUse hook receives, after the call succeeded."""

    hook_event_name: Literal["PostToolUse"] = "PostToolUse"
    tool_response: dict[str, JsonValue] = Field(default_factory=dict)
    duration_ms: int = 0


class PostToolUseFailureInput(_ToolEventInput):
    """What a PostToolUseFailure hook receives, after the call failed (not when it was
    rejected before running, and not when the user cancelled it)."""

    hook_event_name: Literal["PostToolUseFailure"] = "PostToolUseFailure"
    error: str = ""
    is_interrupt: bool = False
    duration_ms: int = 0


ToolHookInput: TypeAlias = PreToolUseInput | PostToolUseInput | PostToolUseFailureInput


class ToolHookOutput(BaseModel):
    """A per-call hook's answer. Each event reads the fields it defines.

    Attributes:
        permission_decision: PreToolUse: ``allow`` skips the ask (not a deny or ask rule),
            ``deny`` answers the call with ``permission_decision_reason``, ``ask`` makes it
            ask, ``defer`` is ignored (it needs Claude Code's resumable ``-p`` mode).
        permission_decision_reason: the reason; for ``deny`` it is told to the model.
        updated_input: PreToolUse: arguments that replace the call's (validated like any
            call's).
        additional_context: text for the model, sent beside the results as its own part.
        block_reason: PostToolUse ``decision: "block"``: the reason, told to the model
            beside the kept result (never replacing it).
        stop: ``continue: false``: the agent stops after this turn (results kept).
        stop_reason: why (``stopReason``).
        system_message: a warning for the user (logged).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    permission_decision: PermissionDecisionValue | None = None
    permission_decision_reason: str | None = None
    updated_input: dict[str, JsonValue] | None = None
    additional_context: str | None = None
    block_reason: str | None = None
    stop: bool = False
    stop_reason: str | None = None
    system_message: str | None = None


_DEPRECATED_DECISIONS: Final = {"approve": "allow", "block": "deny"}


def _string(answer: dict[str, Any], key: str, where: str) -> str | None:
    value = answer.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise HookFailed(f"{where}: {key!r} must be a string, got {value!r:.80}")
    return value


def parse_tool_hook_answer(event: HookEvent, answer: dict[str, Any], label: str) -> ToolHookOutput:
    """Read Claude Code's JSON answer for ``event``.

    Raises:
        HookFailed: the answer does not fit the schema (a non-blocking hook error).
    """
    where = f"hook {label!r} ({event})"
    fields: dict[str, Any] = {}
    cont = answer.get("continue", True)
    if not isinstance(cont, bool):
        raise HookFailed(f"{where}: 'continue' must be true or false, got {cont!r:.80}")
    if cont is False:
        fields["stop"] = True
        fields["stop_reason"] = _string(answer, "stopReason", where)
    fields["system_message"] = _string(answer, "systemMessage", where)
    decision = answer.get("decision")
    reason = _string(answer, "reason", where)
    if decision is not None and not isinstance(decision, str):
        raise HookFailed(f"{where}: 'decision' must be a string, got {decision!r:.80}")
    if event == "PreToolUse" and decision is not None:
        if decision not in _DEPRECATED_DECISIONS:
            raise HookFailed(f"{where}: 'decision' must be 'approve' or 'block', got {decision!r}")
        fields["permission_decision"] = _DEPRECATED_DECISIONS[decision]
        fields["permission_decision_reason"] = reason
    elif decision is not None:
        if decision != "block":
            raise HookFailed(f"{where}: 'decision' must be 'block', got {decision!r}")
        fields["block_reason"] = reason or f"blocked by hook {label!r}"
    context = _string(answer, "additionalContext", where)
    specific = answer.get("hookSpecificOutput")
    if specific is not None:
        if not isinstance(specific, dict):
            raise HookFailed(f"{where}: 'hookSpecificOutput' must be an object")
        named = specific.get("hookEventName")
        if named != event:
            raise HookFailed(
                f"{where}: hookSpecificOutput.hookEventName must be {event!r}, got {named!r}"
            )
        context = _string(specific, "additionalContext", where) or context
        if event == "PreToolUse":
            value = specific.get("permissionDecision")
            if value is not None:
                if value not in ("allow", "deny", "ask", "defer"):
                    raise HookFailed(
                        f"{where}: permissionDecision must be allow, deny, ask or defer, "
                        f"got {value!r:.80}"
                    )
                fields["permission_decision"] = value
            why = _string(specific, "permissionDecisionReason", where)
            if why is not None:
                fields["permission_decision_reason"] = why
            updated = specific.get("updatedInput")
            if updated is not None:
                if not isinstance(updated, dict):
                    raise HookFailed(f"{where}: updatedInput must be an object of arguments")
                fields["updated_input"] = updated
    fields["additional_context"] = context
    try:
        return ToolHookOutput.model_validate(
            {key: value for key, value in fields.items() if value is not None}
        )
    except ValueError as exc:
        raise HookFailed(f"{where}: {exc}") from None


def replaced_output_keys(answer: dict[str, Any]) -> list[str]:
    """Keys asking to replace a tool's output, which toolbatch never does (logged)."""
    specific = answer.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        return []
    return [key for key in ("updatedToolOutput", "updatedMCPToolOutput") if key in specific]


def truncate_middle(text: str, limit: int = MAX_HOOK_ERROR_CHARS) -> str:
    """``text`` cut in the middle around a marker, as Claude Code cuts ``error``."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}... [{len(text) - 2 * keep:,} characters truncated] ...{text[-keep:]}"
