"""The per-call gate: PreToolUse hooks, permission rules and ``approve`` before a call runs;
PostToolUse / PostToolUseFailure hooks after it.

Before a call (the order Claude Code documents: hooks fire first, then the permission
rules, ecosystem-2.md 1.5 and 2):

1. PreToolUse hooks run. A ``deny`` (or exit 2) answers the call in place with the hook's
   reason. ``updatedInput`` replaces the arguments and is validated like any call's; what
   runs, what is asked about and what later hooks see is the updated call.
2. The permission rules decide on that call: a deny rule answers it in place, naming the
   rule; an ask rule, or a hook's ``ask``, asks; an allow rule or a hook's ``allow`` skips
   the ask a tool declares (``needs_permission``). A hook's ``allow`` never overrides a deny
   or ask rule. A trusted tool (an MCP server's ``trust`` / ``alwaysAllow``) skips ask rules
   and its own ask, not a hook's ``ask`` and never a deny. ``defaultMode:
   bypassPermissions`` answers every ask with yes, ``dontAsk`` with no.
3. Asking means calling ``approve(call, declaration)``, sync or async (a sync one runs in a
   worker thread). With no ``approve`` (headless) a call a rule or hook asks about is
   denied, naming what asked; a tool that only declares ``needs_permission`` runs, as it
   always has headless. ``approve`` returning ``False`` is the user's no; raising (or
   returning something that is not a bool) is an ``approval_failed`` error response that
   says so, never "the user did not allow".

After a call: PostToolUse (success) or PostToolUseFailure (error; not a cancellation) hooks
run. Nothing they say rewrites the result: their context, ``decision: "block"`` reasons and
exit-2 stderr ride on the response as ``hook_notes`` and become the turn's own text parts in
``complete_turn`` (bounded like any text); ``continue: false`` stops the agent after the
turn (``Turn.stop_reason``).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio.to_thread
import structlog
from pydantic import JsonValue, ValidationError

from toolbatch._core import (
    FunctionResponsePart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    replace_fields,
)
from toolbatch.hooks import (
    DEFAULT_HOOK_INPUT_CHARS,
    EventHook,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreToolUseInput,
    bound_object,
    run_post_tool_use_hooks,
    run_pre_tool_use_hooks,
    truncate_middle,
)
from toolbatch.permissions import SHELL_TOOL, Permissions

__all__ = ["Admitted", "ApprovalCallback", "CallGate", "ask_approval", "refusal"]

log = structlog.get_logger("toolbatch.scheduler")

ApprovalCallback = Callable[[ToolCall, ToolDeclaration], Awaitable[bool] | bool]
"""Asked before a call that needs permission runs: ``True`` runs it, ``False`` rejects it.
May be a plain function (run in a worker thread) or a coroutine function."""

_DENIED_HINT: Final = "do not retry it unchanged"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A call the gate lets run: the call to run (arguments possibly updated by a hook) and
    what PreToolUse hooks said for the model."""

    call: ToolCall
    notes: tuple[str, ...] = ()
    stop: str | None = None


async def ask_approval(
    approve: ApprovalCallback, call: ToolCall, declaration: ToolDeclaration
) -> bool | str:
    """``approve``'s answer, or why asking failed (a ``str``: the callback's own error)."""
    try:
        if inspect.iscoroutinefunction(approve) or inspect.iscoroutinefunction(
            getattr(approve, "__call__", None)  # noqa: B004  (an object with async __call__)
        ):
            answer: Any = await approve(call, declaration)  # type: ignore[misc]
        else:
            answer = await anyio.to_thread.run_sync(approve, call, declaration)
            if inspect.isawaitable(answer):
                answer = await answer
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        log.warning("scheduler.approval_failed", call_id=call.id, error=repr(exc))
        return f"{type(exc).__name__}: {exc}"
    if not isinstance(answer, bool):
        return f"it returned {answer!r} instead of True or False"
    return answer


def refusal(call: ToolCall, answer: bool | str) -> ToolCallResponse | None:
    """The answer to a call ``approve`` did not allow (``None`` when it did): the user's no,
    or the callback's failure, told apart."""
    if answer is True:
        return None
    if answer is False:
        return ToolCallResponse.failed(
            call,
            f"the user did not allow {call.name!r} to run; {_DENIED_HINT}",
            error_type="permission_denied",
        )
    return ToolCallResponse.failed(
        call,
        f"{call.name!r} was not run: asking for permission failed, because the approve "
        f"callback did not answer ({answer}); this is an error in the host program, not the "
        f"user's decision",
        error_type="approval_failed",
    )


def _denied(
    call: ToolCall, message: str, notes: Sequence[str], stop: str | None
) -> ToolCallResponse:
    response = ToolCallResponse.failed(call, message, error_type="permission_denied")
    if notes or stop:
        response = replace_fields(response, hook_notes=tuple(notes), hook_stop=stop)
    return response


@dataclass(frozen=True, slots=True)
class CallGate:
    """The checks around each call of a session (see the module docstring)."""

    hooks: tuple[EventHook, ...] = ()
    permissions: Permissions = field(default_factory=Permissions)
    hook_timeout_s: float = 15.0
    session_id: str | None = None
    input_chars: int = DEFAULT_HOOK_INPUT_CHARS
    has_pre: bool = False
    has_post: bool = False

    @classmethod
    def build(
        cls,
        hooks: Sequence[EventHook],
        permissions: Permissions,
        *,
        hook_timeout_s: float,
        session_id: str | None,
        input_chars: int = DEFAULT_HOOK_INPUT_CHARS,
    ) -> CallGate:
        """A gate for these hooks and rules; a hook's input holds at most ``input_chars``."""
        tool_hooks = tuple(hook for hook in hooks if hook.event != "PostToolBatch")
        return cls(
            hooks=tool_hooks,
            permissions=permissions,
            hook_timeout_s=hook_timeout_s,
            session_id=session_id,
            input_chars=input_chars,
            has_pre=any(hook.event == "PreToolUse" for hook in tool_hooks),
            has_post=any(hook.event != "PreToolUse" for hook in tool_hooks),
        )

    @property
    def checks_before(self) -> bool:
        """Whether calls need the gate before they run (besides a plain ``approve``)."""
        return self.has_pre or not self.permissions.empty

    def _input_common(self, call: ToolCall) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "cwd": os.getcwd(),
            "permission_mode": self.permissions.mode,
            "tool_name": call.name,
            "tool_input": bound_object(
                dict(call.args),
                self.input_chars,
                what="the arguments",
                whole=f"call {call.id!r} as the model sent it, not saved",
            ),
            "tool_use_id": call.id,
        }

    async def before(
        self,
        call: ToolCall,
        declaration: ToolDeclaration,
        approve: ApprovalCallback | None,
    ) -> Admitted | ToolCallResponse:
        """Admit the call (maybe with new arguments) or answer it in place."""
        notes: tuple[str, ...] = ()
        stop: str | None = None
        hook_decision: str | None = None
        hook_source = ""
        if self.has_pre:
            data = PreToolUseInput.model_construct(
                hook_event_name="PreToolUse", **self._input_common(call)
            )
            outcome = await run_pre_tool_use_hooks(
                self.hooks, data, default_timeout_s=self.hook_timeout_s
            )
            if outcome is not None:
                notes, stop = tuple(outcome.notes), outcome.stop_reason
                hook_decision = outcome.decision
                hook_source = f"the PreToolUse hook {outcome.source}"
                if outcome.reason:
                    hook_source += f" ({outcome.reason})"
                if outcome.decision == "deny":
                    reason = outcome.reason or "no reason given"
                    return _denied(
                        call,
                        f"a PreToolUse hook ({outcome.source}) denied {call.name!r}: {reason}",
                        notes,
                        stop,
                    )
                if outcome.updated_input is not None:
                    updated = _updated_call(call, outcome.updated_input, outcome.source)
                    if isinstance(updated, ToolCallResponse):
                        return updated
                    call = updated
        rule = self.permissions.decide(call.name, call.args)
        if rule.behavior == "deny" and rule.rule is not None:
            return _denied(
                call,
                f"{call.name!r} is denied by the permission rule {rule.rule.describe()}; "
                f"{_DENIED_HINT}",
                notes,
                stop,
            )
        asker: str | None = None
        if rule.behavior == "ask" and rule.rule is not None and not declaration.trusted:
            asker = f"the permission rule {rule.rule.describe()}"
        elif hook_decision == "ask":
            asker = hook_source
        elif rule.behavior == "allow" or hook_decision == "allow" or declaration.trusted:
            asker = None
        elif declaration.needs_permission and approve is not None:
            asker = f"the tool {call.name!r} (it needs permission)"
        if asker is not None:
            refused = await self._ask(asker, call, declaration, approve)
            if refused is not None:
                if notes or stop:
                    refused = replace_fields(refused, hook_notes=notes, hook_stop=stop)
                return refused
        return Admitted(call, notes, stop)

    async def _ask(
        self,
        asker: str,
        call: ToolCall,
        declaration: ToolDeclaration,
        approve: ApprovalCallback | None,
    ) -> ToolCallResponse | None:
        """``None`` when the call may run, else its answer."""
        mode = self.permissions.mode
        if mode == "bypassPermissions":
            return None
        if mode == "dontAsk":
            return ToolCallResponse.failed(
                call,
                f"{call.name!r} was not run: {asker} asks before it runs, and the settings' "
                f"defaultMode 'dontAsk' refuses every call that would ask; add an allow rule",
                error_type="permission_denied",
            )
        if approve is None:
            return ToolCallResponse.failed(
                call,
                f"{call.name!r} was not run: {asker} asks before it runs, and nobody can be "
                f"asked here (no approve callback: a headless run); add an allow rule for it "
                f"or run with an approve callback",
                error_type="permission_denied",
            )
        return refusal(call, await ask_approval(approve, call, declaration))

    async def after(
        self, call: ToolCall, response: ToolCallResponse, admitted: Admitted, duration_ms: int
    ) -> ToolCallResponse:
        """Run the post-call hooks; attach everything the hooks said to the response."""
        notes = list(admitted.notes)
        stop = admitted.stop
        if self.has_post and response.status in ("success", "error"):
            common = self._input_common(call)
            data: PostToolUseInput | PostToolUseFailureInput
            if response.status == "success":
                data = PostToolUseInput.model_construct(
                    hook_event_name="PostToolUse",
                    tool_response=bound_object(
                        _tool_response(call, response),
                        self.input_chars,
                        what="the response",
                        whole=", ".join(map(str, response.persisted_output_files or ()))
                        or "not saved",
                    ),
                    duration_ms=duration_ms,
                    **common,
                )
            else:
                data = PostToolUseFailureInput.model_construct(
                    hook_event_name="PostToolUseFailure",
                    error=truncate_middle(response.error or ""),
                    is_interrupt=False,
                    duration_ms=duration_ms,
                    **common,
                )
            outcome = await run_post_tool_use_hooks(
                self.hooks, data, default_timeout_s=self.hook_timeout_s
            )
            if outcome is not None:
                notes.extend(outcome.notes)
                stop = outcome.stop_reason or stop
        if not notes and stop is None:
            return response
        return replace_fields(response, hook_notes=tuple(notes), hook_stop=stop)


def _updated_call(
    call: ToolCall, updated: dict[str, JsonValue], source: str | None
) -> ToolCall | ToolCallResponse:
    try:
        return ToolCall.model_validate(
            {
                "id": call.id,
                "name": call.name,
                "args": updated,
                "ordinal": call.ordinal,
                "prompt_id": call.prompt_id,
            }
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)[:3]
        )
        return ToolCallResponse.failed(
            call,
            f"the PreToolUse hook {source} replaced the arguments of {call.name!r} with "
            f"invalid ones ({problems}); the call was not run",
            error_type="invalid_args",
        )


def _tool_response(call: ToolCall, response: ToolCallResponse) -> dict[str, JsonValue]:
    """The function response body the model gets; Claude Code's Bash keys for the shell."""
    body: dict[str, JsonValue] = {}
    for part in response.parts:
        if isinstance(part, FunctionResponsePart):
            body = dict(part.function_response.response)
            break
    if call.name == SHELL_TOOL:
        output = body.get("output")
        body = {
            **body,
            "stdout": output if isinstance(output, str) else "",
            "stderr": "",
            "interrupted": response.status != "success",
            "isImage": False,
        }
    return body
