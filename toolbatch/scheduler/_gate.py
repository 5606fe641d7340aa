"""The per-call gate: PreToolUse hooks, permission rules and ``approve`` before a call runs;
PostToolUse / PostToolUseFailure hooks after it.

Before a call (the order Claude Code documents: hooks fire first, then the permission
rules, ecosystem-2.md 1.5 and 2):

1. PreToolUse hooks run. A ``deny`` (or exit 2) answers the call in place with the hook's
   reason. ``updatedInput`` replaces the arguments and is validated like any call's; what
   runs, what is asked about and what later hooks see is the updated call.
2. The permission rules decide on that call (``toolbatch/permissions/README.md``): a deny
   rule answers it in place, naming the rule; an ask rule, or a hook's ``ask``, asks; an
   allow rule, a hook's ``allow``, a trusted tool (an MCP server's ``trust`` /
   ``alwaysAllow``) or the mode ``acceptEdits``' own approvals let it run. A hook's ``allow``
   never overrides a deny or ask rule; a trusted tool skips ask rules, never a hook's ``ask``
   or a deny.
3. With permission rules in force (or the mode ``dontAsk``), they are an allow list: a call
   no allow rule covers (a tool that declares ``read_only`` aside) is asked, and refused
   when nobody can be asked, naming the allow rules. Without rules, a tool that declares
   ``needs_permission`` is asked when there is an ``approve`` callback, and runs headless,
   as it always has. ``bypassPermissions`` asks only what an ask rule or a hook asks;
   ``dontAsk`` refuses whatever would ask.
4. Asking means calling ``approve(call, declaration)``, sync or async (a sync one runs in a
   worker thread); with no ``approve`` (headless) the call is refused, naming what asked.
   ``approve`` returning ``False`` is the user's no; raising (or returning something that
   is not a bool) is an ``approval_failed`` error response that says so, never "the user
   did not allow".

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
from contextvars import ContextVar
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
    claude_tool_input,
    claude_tool_name,
    run_post_tool_use_hooks,
    run_pre_tool_use_hooks,
    tool_args_from_claude,
    truncate_middle,
)
from toolbatch.permissions import SHELL_TOOL, Permissions
from toolbatch.producers import without_exit_line

__all__ = [
    "Admitted",
    "ApprovalCallback",
    "CallGate",
    "approval_reason",
    "ask_approval",
    "refusal",
]

log = structlog.get_logger("toolbatch.scheduler")

ApprovalCallback = Callable[[ToolCall, ToolDeclaration], Awaitable[bool] | bool]
"""Asked before a call that needs permission runs: ``True`` runs it, ``False`` rejects it.
May be a plain function (run in a worker thread) or a coroutine function."""

_DENIED_HINT: Final = "do not retry it unchanged"
_ASKER: Final[ContextVar[str | None]] = ContextVar("toolbatch_approval_reason", default=None)


def approval_reason() -> str | None:
    """While an ``approve`` callback runs: what asked for it, for the question shown to the
    user (``"the permission rule 'Bash(git push:*)' (ask, in .claude/settings.json)"``,
    ``"the PreToolUse hook 'command:guard.sh'"``); ``None`` when only the tool's own
    ``needs_permission`` asks, or outside a callback."""
    return _ASKER.get()


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
    transcript_path: str | None = None
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
        transcript_path: str | None = None,
    ) -> CallGate:
        """A gate for these hooks and rules; a hook's input holds at most ``input_chars``."""
        tool_hooks = tuple(hook for hook in hooks if hook.event != "PostToolBatch")
        return cls(
            hooks=tool_hooks,
            permissions=permissions,
            hook_timeout_s=hook_timeout_s,
            session_id=session_id,
            input_chars=input_chars,
            transcript_path=transcript_path,
            has_pre=any(hook.event == "PreToolUse" for hook in tool_hooks),
            has_post=any(hook.event != "PreToolUse" for hook in tool_hooks),
        )

    @property
    def checks_before(self) -> bool:
        """Whether calls need the gate before they run (besides a plain ``approve``)."""
        return self.has_pre or not self.permissions.empty

    @property
    def permission_mode(self) -> str:
        """The mode as hooks are told it (Claude Code sends ``manual`` as ``default``)."""
        mode = self.permissions.mode
        return "default" if mode == "manual" else mode

    def _input_common(self, call: ToolCall) -> dict[str, Any]:
        """The fields every per-call hook input has, in Claude Code's names and shapes."""
        return {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": os.getcwd(),
            "permission_mode": self.permission_mode,
            "tool_name": claude_tool_name(call.name),
            "tool_input": bound_object(
                claude_tool_input(call.name, call.args),
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
                self.hooks, data, default_timeout_s=self.hook_timeout_s, call_name=call.name
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
                    args = tool_args_from_claude(call.name, outcome.updated_input)
                    updated = _updated_call(call, args, outcome.source)
                    if isinstance(updated, ToolCallResponse):
                        return updated
                    call = updated
        decision = self.permissions.decide(call.name, call.args)
        if decision.behavior == "deny" and decision.rule is not None:
            why = f": {decision.reason}" if decision.reason else ""
            return _denied(
                call,
                f"{call.name!r} is denied by the permission rule {decision.rule.describe()}"
                f"{why}; {_DENIED_HINT}",
                notes,
                stop,
            )
        asker: str | None = None
        unlisted: str | None = None
        asked_by: str | None = None  # what asked besides the tool itself: approval_reason()
        if decision.behavior == "ask" and decision.rule is not None and not declaration.trusted:
            asker = f"the permission rule {decision.rule.describe()}"
            if decision.reason:
                asker += f" ({decision.reason})"
            asked_by = asker
        elif hook_decision == "ask":
            asker = asked_by = hook_source
        elif (
            decision.behavior == "allow"
            or hook_decision == "allow"
            or declaration.trusted
            or self.permissions.mode == "bypassPermissions"
        ):
            asker = None
        elif self._allow_list and not declaration.read_only:
            unlisted = decision.reason or f"no allow rule covers {call.name!r}"
        elif declaration.needs_permission and approve is not None:
            asker = f"the tool {call.name!r} (it needs permission)"
        if asker is not None or unlisted is not None:
            refused = await self._ask(
                asker,
                unlisted,
                call,
                declaration,
                approve,
                reason=asked_by if unlisted is None else f"the allow list: {unlisted}",
            )
            if refused is not None:
                if notes or stop:
                    refused = replace_fields(refused, hook_notes=notes, hook_stop=stop)
                return refused
        return Admitted(call, notes, stop)

    @property
    def _allow_list(self) -> bool:
        """Whether what no allow rule covers is asked (refused with nobody to ask)."""
        return self.permissions.restricts or self.permissions.mode == "dontAsk"

    async def _ask(
        self,
        asker: str | None,
        unlisted: str | None,
        call: ToolCall,
        declaration: ToolDeclaration,
        approve: ApprovalCallback | None,
        *,
        reason: str | None = None,
    ) -> ToolCallResponse | None:
        """``None`` when the call may run, else its answer. ``asker`` names what asks;
        ``unlisted`` says why no allow rule covers the call (asked under the allow list)."""
        mode = self.permissions.mode
        if unlisted is not None:
            summary = self.permissions.allow_summary()
            if mode == "dontAsk":
                return ToolCallResponse.failed(
                    call,
                    f"{call.name!r} was not run: {unlisted}, and the permission mode 'dontAsk' "
                    f"refuses what no allow rule covers; {summary}",
                    error_type="permission_denied",
                )
            if approve is None:
                return ToolCallResponse.failed(
                    call,
                    f"{call.name!r} was not run: {unlisted}. With permission rules in force "
                    f"and nobody to ask (no approve callback: a headless run), only what an "
                    f"allow rule covers runs; {summary}. Add an allow rule for it, or run "
                    f"with an approve callback",
                    error_type="permission_denied",
                )
            return await self._asked(reason, call, declaration, approve)
        if mode == "dontAsk":
            return ToolCallResponse.failed(
                call,
                f"{call.name!r} was not run: {asker} asks before it runs, and the permission "
                f"mode 'dontAsk' refuses every call that would ask; add an allow rule",
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
        return await self._asked(reason, call, declaration, approve)

    @staticmethod
    async def _asked(
        reason: str | None,
        call: ToolCall,
        declaration: ToolDeclaration,
        approve: ApprovalCallback,
    ) -> ToolCallResponse | None:
        # The callback may name what asked (approval_reason); a context variable, so the
        # ApprovalCallback signature stays as every caller wrote it.
        token = _ASKER.set(reason)
        try:
            return refusal(call, await ask_approval(approve, call, declaration))
        finally:
            _ASKER.reset(token)

    async def after(
        self, call: ToolCall, response: ToolCallResponse, admitted: Admitted, duration_ms: int
    ) -> ToolCallResponse:
        """Run the post-call hooks; attach everything the hooks said to the response."""
        notes = list(admitted.notes)
        stop = admitted.stop
        if self.has_post and response.status in ("success", "error"):
            common = self._input_common(call)
            data: PostToolUseInput | PostToolUseFailureInput
            tool_response, failure = _tool_response(call, response)
            if failure is None:
                data = PostToolUseInput.model_construct(
                    hook_event_name="PostToolUse",
                    tool_response=bound_object(
                        tool_response,
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
                    error=truncate_middle(failure),
                    is_interrupt=False,
                    duration_ms=duration_ms,
                    **common,
                )
            outcome = await run_post_tool_use_hooks(
                self.hooks, data, default_timeout_s=self.hook_timeout_s, call_name=call.name
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


def _tool_response(
    call: ToolCall, response: ToolCallResponse
) -> tuple[dict[str, JsonValue], str | None]:
    """What PostToolUse receives as ``tool_response``, or the PostToolUseFailure ``error``.

    The shell's response is Claude Code's Bash output object (``stdout``, ``stderr``,
    ``interrupted``, ``isImage``); a command that exited non-zero is a failure whose error
    starts ``Exit code N`` (128 + N for a death by signal N), as Claude Code reports it. The
    status is the response's ``returncode``, never read from the output. Other tools give
    the function response body as the tool returned it (before the batch budget).
    """
    body: dict[str, JsonValue] = {}
    for part in response.parts:
        if isinstance(part, FunctionResponsePart):
            body = dict(part.function_response.response)
            break
    if response.status != "success":
        return body, response.error or ""
    if call.name != SHELL_TOOL:
        return body, None
    output = body.get("output")
    text = output if isinstance(output, str) else ""
    code = response.returncode
    if code is not None:
        text = without_exit_line(text)
        if code:
            return body, f"Exit code {code if code > 0 else 128 - code}\n{text}"
    # stdout and stderr share one pipe, so the interleaved output is all in stdout.
    return {"stdout": text, "stderr": "", "interrupted": False, "isImage": False}, None
