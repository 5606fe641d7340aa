"""Hook runs: a ``toolbatch.hook {event}`` span each, and ``toolbatch.hook.duration``.

A command hook is named by a digest of its command (which may hold a secret), never by
the command itself. The span is current while the hook runs, so a command hook's
``TRACEPARENT`` names it as the parent. Its outcome is what the hook's answer does:
``no_answer``, ``context``, ``stop`` or ``replace`` (the strongest it asks for), or
``failed`` (it crashed, timed out or answered something that is not a hook answer; the
batch goes on without it).
"""

from __future__ import annotations

import time
from typing import Any, Final, Literal, TypeAlias

from toolbatch.telemetry._bounds import hook_name
from toolbatch.telemetry._names import (
    ERROR_TYPE,
    HOOK_EVENT,
    HOOK_NAME,
    HOOK_OUTCOME,
    HOOK_TYPE,
    SPAN_HOOK,
)
from toolbatch.telemetry._runtime import Otel, never_raises, recording
from toolbatch.telemetry._turn import TurnTelemetry, current_turn

__all__ = ["HookKind", "HookTelemetry", "trace_hook"]

HookKind: TypeAlias = Literal["command", "python"]


def _outcome(answer: Any) -> tuple[str, int]:
    """The outcome of a hook's answer (a ``PostToolBatchOutput`` or ``None``) and its
    number of replacements."""
    if answer is None:
        return "no_answer", 0
    replaced = len(getattr(answer, "replace", None) or {})
    if getattr(answer, "stop", False):
        return "stop", replaced
    if replaced:
        return "replace", replaced
    if getattr(answer, "additional_context", None):
        return "context", 0
    return "no_answer", 0


class HookTelemetry:
    """One hook run's span, current from creation until :meth:`end`."""

    __slots__ = ("_error_type", "_metric", "_otel", "_start_ns", "_token", "_turn", "span")

    def __init__(
        self, otel: Otel, turn: TurnTelemetry | None, event: str, name: str, kind: HookKind
    ) -> None:
        self._otel = otel
        self._turn = turn
        self._error_type: str | None = None
        self._start_ns = time.time_ns()
        self._metric: dict[str, Any] = {HOOK_EVENT: event, HOOK_TYPE: kind}
        self.span = otel.tracer().start_span(
            f"{SPAN_HOOK} {event}",
            kind=otel.trace.SpanKind.INTERNAL,
            attributes={HOOK_EVENT: event, HOOK_NAME: hook_name(name, kind), HOOK_TYPE: kind},
            start_time=self._start_ns,
        )
        self._token = otel.context.attach(otel.trace.set_span_in_context(self.span))

    def failed(self, error_type: str) -> None:
        """The hook failed (``timeout``, or the name of what it raised)."""
        self._error_type = error_type

    def end(self, answer: Any) -> None:
        """End the run with the hook's answer (``None``: it answered nothing or failed)."""
        self._otel.context.detach(self._token)
        self._end(answer)

    @never_raises
    def _end(self, answer: Any) -> None:
        otel = self._otel
        end_ns = time.time_ns()
        if self._error_type is not None:
            outcome, replaced = "failed", 0
            self.span.set_attribute(ERROR_TYPE, self._error_type)
            self._metric[ERROR_TYPE] = self._error_type
            self.span.set_status(otel.trace.StatusCode.ERROR)
        else:
            outcome, replaced = _outcome(answer)
        self.span.set_attribute(HOOK_OUTCOME, outcome)
        self._metric[HOOK_OUTCOME] = outcome
        self.span.end(end_time=end_ns)
        otel.meters().hook_duration.record((end_ns - self._start_ns) / 1e9, self._metric)
        if self._turn is not None:
            self._turn.note_hook(outcome, replaced)


class _NullHook:
    __slots__ = ()

    def failed(self, error_type: str) -> None:
        return None

    def end(self, answer: Any) -> None:
        return None


_NULL_HOOK: Final = _NullHook()


def trace_hook(event: str, name: str, kind: HookKind) -> HookTelemetry | _NullHook:
    """Start tracing one hook run; call ``.failed(...)`` on failure and ``.end(answer)`` in
    a ``finally`` of the same task (a no-op when telemetry is off)."""
    turn = current_turn()
    otel = turn.otel if turn is not None else recording()
    if otel is None:
        return _NULL_HOOK
    return _start(otel, turn, event, name, kind) or _NULL_HOOK


@never_raises
def _start(
    otel: Otel, turn: TurnTelemetry | None, event: str, name: str, kind: HookKind
) -> HookTelemetry:
    return HookTelemetry(otel, turn, event, name, kind)
