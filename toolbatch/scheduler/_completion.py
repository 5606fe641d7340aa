"""Completing one turn, once: finalize, PostToolBatch hooks, finalize, send guard, record.

This is ``ToolScheduler.complete_turn``'s work. What the calls' own hooks said
(PreToolUse, PostToolUse) and what the PostToolBatch hooks add is the turn's own text
(``toolbatch.finalize.HookText``): the second pass bounds it with the responses under the
one budget, and it comes back apart from them, never posing as a tool's response. The
turn's parts are the responses' parts, then the hook text's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import anyio
import structlog

from toolbatch._core import Part, ToolCallResponse, Turn, completed_turn
from toolbatch.artifacts import ArtifactStore, persist_deadline
from toolbatch.errors import RecorderError
from toolbatch.finalize import (
    Budget,
    HookText,
    enforce_send_budget,
    finalize_turn,
)
from toolbatch.hooks import (
    CommandHook,
    PostToolBatchHook,
    apply_hook_output,
    build_hook_input,
    hook_input_chars,
    run_post_tool_batch_hooks,
)
from toolbatch.recorder import JsonlRecorder, Recorder
from toolbatch.scheduler._config import SchedulerConfig
from toolbatch.scheduler._gate import CallGate

__all__ = ["TurnCompleter", "transcript_path"]

log = structlog.get_logger("toolbatch.scheduler")

CALL_HOOK_STOP_NOTE: Final = "A hook stopped the agent after these tool results: "
MIN_PERSIST_S: Final = 0.001
"""What a finalize pass gets to persist once the turn's persist deadline has passed."""


class TurnCompleter:
    """Completes the turns of one open session: what ``ToolScheduler.complete_turn`` does."""

    def __init__(
        self,
        config: SchedulerConfig,
        gate: CallGate,
        *,
        store: ArtifactStore | None,
        session_id: str,
        batch_hooks: Sequence[PostToolBatchHook | CommandHook],
    ) -> None:
        self.config = config
        self._gate = gate
        self._store = store
        self._session_id = session_id
        self._batch_hooks = batch_hooks
        self._lifecycle = config.lifecycle  # the config is frozen: read once, not per turn

    async def complete(
        self,
        responses: list[ToolCallResponse],
        limit: Budget,
        record: Recorder | None,
    ) -> Turn:
        """The turn of ``responses`` (in call order), recorded in ``record``."""
        lifecycle = self._lifecycle
        # What the calls' own hooks said (PreToolUse, PostToolUse) is the turn's own text.
        context, stop_reason = _call_hook_text(responses)
        # One persist deadline for the turn, both passes, never past the caller's scopes: a
        # hanging disk delays a turn by it once, not once per pass. It is set when a pass
        # first writes (most turns write nothing and never read the clock).
        persist = _PersistDeadline()
        first = await finalize_turn(
            responses,
            (),
            budget=limit,
            store=self._store,
            lifecycle_tools=lifecycle,
            persist_timeout_s=persist.seconds_left,
        )
        finalized, length = first.responses, first.length
        changed = False
        if self._batch_hooks:
            batch = build_hook_input(
                finalized,
                session_id=self._session_id,
                transcript_path=transcript_path(record) or self._gate.transcript_path,
                permission_mode=self._gate.permission_mode,
                input_chars=hook_input_chars(limit),
            )
            output = await run_post_tool_batch_hooks(
                self._batch_hooks, batch, timeout_s=self.config.hook_timeout
            )
            outcome = apply_hook_output(finalized, output)
            finalized, changed = outcome.responses, output is not None
            context = [*context, *outcome.context]
            stop_reason = stop_reason or outcome.stop_reason
        hook_text: list[HookText] = []
        if changed or context:
            second = await finalize_turn(
                finalized,
                [HookText(text) for text in context],
                budget=limit,
                store=self._store,
                lifecycle_tools=lifecycle,
                persist_timeout_s=persist.seconds_left,
            )
            finalized, hook_text, length = second.responses, second.hook_text, second.length
        turn = _guarded_turn(finalized, hook_text, limit, lifecycle, stop_reason, length)
        if record is not None:
            try:
                await record.record_turn(turn)
            except RecorderError as exc:
                exc.turn = turn
                raise
        if _logs_info():  # no logger is built for a turn whose summary is filtered out
            log.info(
                "turn.completed",
                responses=len(turn.responses),
                chars=turn.content_length if length is None else length,
                budget=limit,
                stopped=stop_reason is not None,
            )
        return turn


class _PersistDeadline:
    """A turn's one persist deadline, on the anyio clock, set when a pass first writes."""

    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: float | None = None

    def seconds_left(self) -> float:
        """Seconds until the deadline; a past one still gives a pass a moment (finalize
        needs a timeout > 0), so its writes are abandoned at once."""
        if self._until is None:
            self._until = persist_deadline()
        return max(self._until - anyio.current_time(), MIN_PERSIST_S)


_FILTERING_LEVELS: Final = {
    structlog.make_filtering_bound_logger(level): level
    for level in (
        logging.NOTSET,
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
        logging.CRITICAL,
    )
}
"""structlog's filtering logger classes (its default and ``configure_logging``'s) and the
least severe level each emits."""


def _logs_info() -> bool:
    """Whether the scheduler's info events are emitted (a logger that cannot say: yes).

    Read from the live configuration each turn: a filtering logger's class says its level,
    so no logger is built to find out (a bound logger cannot be kept: unconfigured
    structlog binds the ``sys.stdout`` of the moment). Other wrapper classes are asked.
    """
    level = _FILTERING_LEVELS.get(structlog.get_config()["wrapper_class"])
    if level is not None:
        return level <= logging.INFO
    enabled = getattr(log.bind(), "is_enabled_for", None)
    return enabled is None or bool(enabled(logging.INFO))


def _call_hook_text(responses: Sequence[ToolCallResponse]) -> tuple[list[str], str | None]:
    """The per-call hooks' notes in call order, and the first stop they asked for (its note
    after them)."""
    notes: list[str] = []
    stop: str | None = None
    for response in responses:
        if response.hook_notes:
            notes.extend(response.hook_notes)
        if response.hook_stop is not None and stop is None:
            stop = response.hook_stop
    if stop is not None:
        notes.append(CALL_HOOK_STOP_NOTE + stop)
    return notes, stop


def _guarded_turn(
    responses: list[ToolCallResponse],
    hook_text: list[HookText],
    limit: Budget,
    lifecycle: frozenset[str],
    stop_reason: str | None,
    length: int | None,
) -> Turn:
    """The turn after the send guard: the responses' parts, then the hook text's.

    The guard is this turn's one check at the send boundary (a no-op for a finalized
    batch): an agent loop sends the turn's parts as they are. When the last finalize pass
    measured these very responses and hook texts whole (``length``) within the budget,
    the guard would find the same, and is skipped.
    """
    if len(responses) == 1 and not hook_text:
        parts: list[Part] = list(responses[0].parts)
    else:
        parts = [part for response in responses for part in response.parts]
        parts.extend(hook.part() for hook in hook_text)
    if length is not None and limit is not None and length <= limit:
        return completed_turn(responses, parts, stop_reason)
    guarded = enforce_send_budget(parts, limit, lifecycle_tools=lifecycle)
    if guarded is not parts:
        # The guard only rewrites parts in place (same count, same order): each response
        # takes back its own, the hook text's are the rest.
        rebuilt: list[ToolCallResponse] = []
        offset = 0
        for response in responses:
            own = guarded[offset : offset + len(response.parts)]
            offset += len(response.parts)
            rebuilt.append(response if own == response.parts else response.with_parts(own))
        responses = rebuilt
    return completed_turn(responses, guarded, stop_reason)


def transcript_path(recorder: Recorder | None) -> str | None:
    """Where the session is recorded, for hooks' ``transcript_path`` (``None``: nowhere)."""
    return str(recorder.path) if isinstance(recorder, JsonlRecorder) else None
