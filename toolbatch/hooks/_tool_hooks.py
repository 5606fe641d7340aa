"""Running the per-call hooks (PreToolUse, PostToolUse, PostToolUseFailure) and merging them.

Which hooks run (code.claude.com/docs/en/hooks, "Matcher patterns"; ecosystem-2.md 1.2):
``matcher`` omitted, ``""`` or ``"*"`` matches every tool; a matcher of only letters, digits,
``_``, ``-``, spaces, ``,`` and ``|`` is an exact name or a list of names; anything else is a
regular expression searched in the name (unanchored, as JavaScript's ``RegExp.test``).
``Bash`` is the shell's name too, so ``"Bash"`` and ``"Bash|mcp__github__.*"`` match
``run_shell_command``. A handler's ``if`` is one permission rule (``"Bash(rm *)"``), matched
like a deny rule (any subcommand). A handler defined identically twice runs once.

All matching hooks run concurrently, each within its timeout. A hook that crashes, hangs or
answers garbage is logged (``hooks.failed``) and changes nothing, except a PreToolUse hook
configured with ``fail_closed`` (``"failClosed": true`` in settings), whose failure denies
the call. PreToolUse decisions merge as deny > defer > ask > allow; ``defer`` is ignored
(it exists for Claude Code's resumable ``-p`` runs), as is a deny from a hook with
``ignore_decisions`` (``"async": true``: Claude Code runs those in the background, where
they cannot decide). The last ``updatedInput`` in configured order wins.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio
import anyio.to_thread
import structlog
from pydantic import JsonValue

from toolbatch.errors import ConfigError
from toolbatch.hooks._command import CommandHook, HookFailed, hook_payload
from toolbatch.hooks._events import (
    HookEvent,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreToolUseInput,
    ToolHookInput,
    ToolHookOutput,
    parse_tool_hook_answer,
    replaced_output_keys,
)
from toolbatch.permissions import PermissionRule, claude_tool_names
from toolbatch.telemetry import trace_hook

__all__ = [
    "HOOK_EVENTS",
    "EventHook",
    "PostToolUseOutcome",
    "PreToolUseOutcome",
    "ToolHookFunction",
    "run_post_tool_use_hooks",
    "run_pre_tool_use_hooks",
]

log = structlog.get_logger("toolbatch.hooks")

HOOK_EVENTS: Final = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch")
LITERAL_MATCHER: Final = re.compile(r"^[A-Za-z0-9_\- ,|]*$")

ToolHookFunction = Callable[[ToolHookInput], Any]
"""A Python per-call hook: sync or async, returning ``ToolHookOutput``, a dict in Claude
Code's JSON shape, or ``None``."""


@dataclass(frozen=True, slots=True)
class EventHook:
    """A hook bound to an event, as a settings file binds it.

    Args:
        event: ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure`` or ``PostToolBatch``.
        hook: a ``CommandHook``, or a Python callable taking the event's input model
            (sync or async).
        matcher: which tools (see the module docstring); ignored for ``PostToolBatch``.
        condition: Claude Code's ``if``: one permission rule the call must match.
        timeout: seconds a Python hook may take (default: ``SchedulerConfig.hook_timeout``).
        fail_closed: PreToolUse only: a failure of this hook denies the call.
        ignore_decisions: run it, but let it decide nothing (Claude Code's ``async``).
        source: where it was configured, for logs.
    """

    event: HookEvent
    hook: Callable[..., Any] | CommandHook
    matcher: str | None = None
    condition: str | None = None
    timeout: float | None = None
    fail_closed: bool = False
    ignore_decisions: bool = False
    source: str = "<python>"
    _pattern: re.Pattern[str] | frozenset[str] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _rule: PermissionRule | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.event not in HOOK_EVENTS:
            raise ConfigError(
                f"hook event {self.event!r} is not one toolbatch fires; use one of "
                f"{', '.join(HOOK_EVENTS)}"
            )
        if not callable(self.hook):
            raise ConfigError(
                f"the {self.event} hook {self.hook!r} is not callable; pass a function or a "
                f"toolbatch.hooks.CommandHook"
            )
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or not 0 < self.timeout < float("inf")
        ):
            raise ConfigError(
                f"the {self.event} hook's timeout must be a positive number of seconds, "
                f"got {self.timeout!r}"
            )
        object.__setattr__(self, "_pattern", _compile_matcher(self.matcher, self.source))
        if self.condition is not None:
            rule = PermissionRule.parse(self.condition, "deny", source=self.source)
            object.__setattr__(self, "_rule", rule)

    @property
    def label(self) -> str:
        """A short name for logs."""
        hook = self.hook
        if isinstance(hook, CommandHook):
            return f"command:{hook.label}"
        name = getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None)
        return str(name or repr(hook))

    def matches(self, tool: str, args: Mapping[str, Any]) -> bool:
        """Whether this hook runs for a call of ``tool`` with ``args``."""
        names = claude_tool_names(tool)
        pattern = self._pattern
        if isinstance(pattern, frozenset):
            if not any(name in pattern for name in names):
                return False
        elif pattern is not None and not any(pattern.search(name) for name in names):
            return False
        rule = self._rule
        return rule is None or rule.matches_call(names, args)

    def identity(self) -> tuple[Any, ...]:
        """Equal for handlers defined identically (they run once)."""
        hook = self.hook
        if isinstance(hook, CommandHook):
            return ("command", tuple(hook.argv), hook.timeout, self.fail_closed)
        return ("python", id(hook), self.fail_closed)


def _compile_matcher(matcher: str | None, source: str) -> re.Pattern[str] | frozenset[str] | None:
    if matcher is None or matcher.strip() in ("", "*"):
        return None
    if not isinstance(matcher, str):
        raise ConfigError(f"a hook matcher must be a string, got {matcher!r} (in {source})")
    if LITERAL_MATCHER.match(matcher):
        names = {name.strip() for name in re.split(r"[|,]", matcher) if name.strip()}
        return frozenset(names)
    try:
        return re.compile(matcher)
    except re.error as exc:
        raise ConfigError(
            f"the hook matcher {matcher!r} (in {source}) is not a valid regular expression: "
            f"{exc}; escape special characters or list names as 'Bash|Edit'"
        ) from None


@dataclass(slots=True)
class _Answer:
    hook: EventHook
    output: ToolHookOutput | None = None
    failure: str | None = None


async def _run_one(
    hook: EventHook, data: ToolHookInput, default_timeout_s: float, answers: list[_Answer]
) -> None:
    answer = _Answer(hook)
    answers.append(answer)
    label = hook.label
    kind: Literal["command", "python"] = (
        "command" if isinstance(hook.hook, CommandHook) else "python"
    )
    traced = trace_hook(data.hook_event_name, label, kind)
    try:
        answer.output = await _ask(hook, data, default_timeout_s)
    except TimeoutError:
        traced.failed("timeout")
        answer.failure = f"did not answer within {hook.timeout or default_timeout_s:g} s"
    except HookFailed as exc:
        traced.failed(type(exc).__name__)
        answer.failure = str(exc)
    except Exception as exc:  # a crashing hook never breaks the call
        traced.failed(type(exc).__name__)
        answer.failure = f"raised {type(exc).__name__}: {exc}"
    finally:
        traced.end(None)
    if answer.failure is not None:
        log.warning(
            "hooks.failed", hook_event=data.hook_event_name, hook=label, error=answer.failure
        )
    elif answer.output is not None and answer.output.system_message:
        log.warning("hooks.system_message", hook=label, message=answer.output.system_message)


async def _ask(
    hook: EventHook, data: ToolHookInput, default_timeout_s: float
) -> ToolHookOutput | None:
    event = data.hook_event_name
    handler = hook.hook
    if isinstance(handler, CommandHook):
        outcome = await handler.run(hook_payload(data.model_dump(mode="json")))
        parsed = (
            parse_tool_hook_answer(event, outcome.answer, hook.label)
            if outcome.answer is not None
            else None
        )
        if outcome.answer is not None and replaced_output_keys(outcome.answer):
            log.warning(
                "hooks.output_replacement_ignored",
                hook=hook.label,
                hint="toolbatch never rewrites a tool's result; use additionalContext or "
                "decision: block to tell the model",
            )
        if not outcome.blocks:
            return parsed
        base = parsed or ToolHookOutput()
        if event == "PreToolUse":
            json_reason = (
                base.permission_decision_reason if base.permission_decision == "deny" else None
            )
            reason = (
                json_reason or outcome.stderr or f"blocked by hook {hook.label!r} (exit code 2)"
            )
            return base.model_copy(
                update={"permission_decision": "deny", "permission_decision_reason": reason}
            )
        # PostToolUse / PostToolUseFailure cannot block: the stderr is told to the model.
        reason = base.block_reason or outcome.stderr or f"hook {hook.label!r} exited with code 2"
        return base.model_copy(update={"block_reason": reason})
    timeout = hook.timeout if hook.timeout is not None else default_timeout_s
    with anyio.fail_after(timeout):
        if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004  (an object with async __call__)
        ):
            raw = await handler(data)
        else:
            raw = await anyio.to_thread.run_sync(handler, data, abandon_on_cancel=True)
            if inspect.isawaitable(raw):
                raw = await raw
    if raw is None or isinstance(raw, ToolHookOutput):
        return raw
    if isinstance(raw, dict):
        return parse_tool_hook_answer(event, raw, hook.label)
    raise HookFailed(
        f"hook {hook.label!r} returned {type(raw).__name__}; return a "
        f"toolbatch.hooks.ToolHookOutput, a dict in Claude Code's JSON shape, or None"
    )


def _select(
    hooks: Sequence[EventHook], event: HookEvent, tool: str, args: Mapping[str, Any]
) -> list[EventHook]:
    chosen: list[EventHook] = []
    seen: set[tuple[Any, ...]] = set()
    for hook in hooks:
        if hook.event != event or not hook.matches(tool, args):
            continue
        key = hook.identity()
        if key not in seen:
            seen.add(key)
            chosen.append(hook)
    return chosen


async def _run_all(
    hooks: list[EventHook], data: ToolHookInput, default_timeout_s: float
) -> list[_Answer]:
    answers: list[_Answer] = []
    async with anyio.create_task_group() as tg:
        for hook in hooks:
            tg.start_soon(_run_one, hook, data, default_timeout_s, answers)
    order = {id(hook): index for index, hook in enumerate(hooks)}
    answers.sort(key=lambda answer: order[id(answer.hook)])
    return answers


def note(event: str, call_id: str, tool: str, text: str) -> str:
    """How a hook's text for one call is told to the model: its own part, attributed."""
    return f"[{event} hook, call {call_id} ({tool})] {text}"


@dataclass(slots=True)
class PreToolUseOutcome:
    """The merged PreToolUse answer for one call.

    Attributes:
        decision: ``allow``, ``ask``, ``deny`` or ``None`` (no hook decided).
        reason: the deciding hooks' reasons, joined.
        source: which hook(s) decided, for messages.
        updated_input: replacement arguments, if a hook gave them.
        notes: text for the model (each hook's additionalContext).
        stop_reason: set when a hook said ``continue: false``.
    """

    decision: str | None = None
    reason: str | None = None
    source: str | None = None
    updated_input: dict[str, JsonValue] | None = None
    notes: list[str] = field(default_factory=list)
    stop_reason: str | None = None


_PRECEDENCE: Final = {"deny": 4, "defer": 3, "ask": 2, "allow": 1}


async def run_pre_tool_use_hooks(
    hooks: Sequence[EventHook],
    data: PreToolUseInput,
    *,
    default_timeout_s: float,
    call_name: str | None = None,
) -> PreToolUseOutcome | None:
    """Run the PreToolUse hooks that match ``data`` and merge them (``None``: none ran).

    ``call_name`` is the tool's own name (``run_shell_command`` where ``data`` says
    ``Bash``), used to match and in the notes told to the model; default ``data.tool_name``.
    """
    tool = call_name or data.tool_name
    chosen = _select(hooks, "PreToolUse", tool, data.tool_input)
    if not chosen:
        return None
    answers = await _run_all(chosen, data, default_timeout_s)
    outcome = PreToolUseOutcome()
    decided: dict[str, list[_Answer]] = {}
    for answer in answers:
        if answer.failure is not None:
            if answer.hook.fail_closed:
                answer.output = ToolHookOutput(
                    permission_decision="deny",
                    permission_decision_reason=(
                        f"the PreToolUse hook {answer.hook.label!r} failed ({answer.failure}) "
                        f"and is configured to fail closed"
                    ),
                )
            else:
                continue
        output = answer.output
        if output is None or answer.hook.ignore_decisions:
            continue
        if output.permission_decision is not None:
            decided.setdefault(output.permission_decision, []).append(answer)
        if output.updated_input is not None and output.permission_decision != "defer":
            outcome.updated_input = output.updated_input
        if output.additional_context and output.permission_decision != "defer":
            outcome.notes.append(
                note("PreToolUse", data.tool_use_id, tool, output.additional_context)
            )
        if output.stop:
            outcome.stop_reason = output.stop_reason or f"stopped by hook {answer.hook.label!r}"
    if decided:
        winner = max(decided, key=_PRECEDENCE.__getitem__)
        if winner == "defer":
            log.info(
                "hooks.defer_ignored",
                tool=data.tool_name,
                hint="defer needs Claude Code's resumable -p mode; the call goes on",
            )
        else:
            outcome.decision = winner
            reasons = [
                a.output.permission_decision_reason
                for a in decided[winner]
                if a.output is not None and a.output.permission_decision_reason
            ]
            outcome.reason = "; ".join(reasons) or None
            outcome.source = ", ".join(repr(a.hook.label) for a in decided[winner])
    return outcome


@dataclass(slots=True)
class PostToolUseOutcome:
    """What PostToolUse / PostToolUseFailure hooks add to one call's turn.

    Attributes:
        notes: text for the model (context, block reasons, exit-2 stderr), in hook order.
        stop_reason: set when a hook said ``continue: false``.
    """

    notes: list[str] = field(default_factory=list)
    stop_reason: str | None = None


async def run_post_tool_use_hooks(
    hooks: Sequence[EventHook],
    data: PostToolUseInput | PostToolUseFailureInput,
    *,
    default_timeout_s: float,
    call_name: str | None = None,
) -> PostToolUseOutcome | None:
    """Run the matching PostToolUse (or PostToolUseFailure) hooks (``None``: none ran);
    ``call_name`` as for :func:`run_pre_tool_use_hooks`."""
    event = data.hook_event_name
    tool = call_name or data.tool_name
    chosen = _select(hooks, event, tool, data.tool_input)
    if not chosen:
        return None
    answers = await _run_all(chosen, data, default_timeout_s)
    outcome = PostToolUseOutcome()
    for answer in answers:
        output = answer.output
        if output is None or answer.hook.ignore_decisions:
            continue
        for text in (output.block_reason, output.additional_context):
            if text:
                outcome.notes.append(note(event, data.tool_use_id, tool, text))
        if output.stop:
            outcome.stop_reason = output.stop_reason or f"stopped by hook {answer.hook.label!r}"
    return outcome
