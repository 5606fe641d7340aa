"""The turn span and its call spans: one ``toolbatch.turn`` per batch, one ``execute_tool``
per call.

A turn is ``execute`` then ``complete_turn``, and runtimes call them separately (merging
what they answered themselves in between), so the turn span cannot be a ``with`` block
around one method. ``execute`` starts it (:func:`begin_turn`, a child of the span current
in the caller), runs the calls under it and hands it to the turn object it returns
(``PendingTurn.telemetry``); ``complete_turn`` runs finalize, hooks, guard and record
under the same span and ends it. A turn that nothing executed (every call answered by the
runtime) gets its span from ``complete_turn``. A turn executed but dropped without a
completion is ended when the turn object goes away, marked
``toolbatch.turn.completed = false`` and dated when ``execute`` returned.

Every call gets one ``execute_tool {name}`` span, a child of the turn span: started when a
worker takes the call (approval included), current while its producer runs (so child
processes and MCP requests carry its context), ended when the scheduler reports the call
finished. Calls answered in place (unknown, invalid, duplicate) and calls the runtime
answered itself get a span too, of no duration, so every response of a turn has one.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from toolbatch.telemetry._bounds import MAX_CONTENT_CHARS, bounded, metric_tool_name
from toolbatch.telemetry._names import (
    CALL_CHARS,
    CALL_PERSISTED,
    CALL_STATUS,
    ERROR_TYPE,
    ERROR_TYPE_OTHER,
    GEN_AI_CONVERSATION_ID,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    MCP_TOOL_ERROR,
    OPERATION_EXECUTE_TOOL,
    SPAN_TURN,
    TOOL_TYPE_FUNCTION,
    TURN_ARTIFACT_BYTES,
    TURN_ARTIFACT_FAILURES,
    TURN_ARTIFACTS,
    TURN_BUDGET,
    TURN_CALLS,
    TURN_CHARS,
    TURN_COMPLETED,
    TURN_ERRORS,
    TURN_HOOKS,
    TURN_HOOKS_CONTEXT,
    TURN_HOOKS_FAILED,
    TURN_HOOKS_REPLACED,
    TURN_RESPONSES_CUT,
    TURN_SLOTS_CUT,
    TURN_STOPPED,
)
from toolbatch.telemetry._runtime import Otel, capture_content, never_raises, recording

if TYPE_CHECKING:
    from toolbatch._core import ToolCall, ToolCallResponse, Turn

__all__ = [
    "CallTelemetry",
    "TurnTelemetry",
    "begin_turn",
    "call_scope",
    "current_call",
    "current_turn",
    "note_cuts",
]

_TURN: ContextVar[TurnTelemetry | None] = ContextVar("toolbatch_telemetry_turn", default=None)
_CALL: ContextVar[CallTelemetry | None] = ContextVar("toolbatch_telemetry_call", default=None)


def current_turn() -> TurnTelemetry | None:
    """The turn being executed or completed in this context (``None``: telemetry is off)."""
    return _TURN.get()


def current_call() -> CallTelemetry | None:
    """The call whose producer runs in this context, if telemetry is on."""
    return _CALL.get()


def note_cuts(slots_cut: int, responses_cut: int) -> None:
    """A finalize pass cut ``slots_cut`` text slots of ``responses_cut`` responses."""
    turn = _TURN.get()
    if turn is not None:
        turn.note_cuts(slots_cut, responses_cut)


def _status_of(response: ToolCallResponse) -> str:
    if response.status == "error":
        if response.error_type == "timeout":
            return "timed_out"
        if response.error_type == "permission_denied":
            return "denied"
    return response.status


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _result_content(response: ToolCallResponse) -> str:
    """The response as the model reads it, JSON (media as their type and size only)."""
    parts: list[object] = []
    for part in response.parts:
        dumped = part.model_dump(mode="json", by_alias=True, exclude_none=True)
        inline = dumped.get("inlineData")
        if isinstance(inline, dict) and isinstance(inline.get("data"), str):
            inline["data"] = f"<{len(inline['data'])} base64 characters>"
        parts.append(dumped)
    return _json(parts[0] if len(parts) == 1 else parts)


class CallTelemetry:
    """One call's ``execute_tool`` span, from the moment a worker takes the call."""

    __slots__ = (
        "_attributes",
        "_end_ns",
        "_ended",
        "_start_ns",
        "call_id",
        "error_type",
        "metric_attributes",
        "span",
        "turn",
    )

    def __init__(
        self, turn: TurnTelemetry, call: ToolCall | _CallOf, start_ns: int | None = None
    ) -> None:
        self.turn = turn
        self._start_ns = time.time_ns() if start_ns is None else start_ns
        self._ended = False
        self._attributes: dict[str, Any] = {}
        self._end_ns = 0
        self.call_id = bounded(call.id)
        self.error_type: str | None = None
        """Set by a protocol's instrumentation (MCP: ``tool_error``) to override the response's."""
        attributes: dict[str, Any] = {
            # [GENAI-SPANS]: gen_ai.operation.name is given at creation, for sampling.
            GEN_AI_OPERATION_NAME: OPERATION_EXECUTE_TOOL,
            GEN_AI_TOOL_NAME: bounded(call.name),
            GEN_AI_TOOL_CALL_ID: self.call_id,
            GEN_AI_TOOL_TYPE: TOOL_TYPE_FUNCTION,
        }
        if turn.capture:
            attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = bounded(_json(call.args), MAX_CONTENT_CHARS)
        self.metric_attributes: dict[str, Any] = {
            GEN_AI_TOOL_NAME: bounded(call.name),
            GEN_AI_TOOL_TYPE: TOOL_TYPE_FUNCTION,
        }
        otel = turn.otel
        self.span = otel.tracer().start_span(
            f"{OPERATION_EXECUTE_TOOL} {bounded(call.name)}",
            context=turn.context,
            kind=otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self._start_ns,
        )

    def set_tool_type(self, tool_type: str) -> None:
        """Correct ``gen_ai.tool.type`` (the default is ``function``)."""
        self.span.set_attribute(GEN_AI_TOOL_TYPE, tool_type)
        self.metric_attributes[GEN_AI_TOOL_TYPE] = tool_type

    def finish(self, response: ToolCallResponse | None, end_ns: int | None = None) -> None:
        """Note how the call ended and record its metrics; the span ends with the turn
        (:meth:`close`), which knows whether the output was persisted in the end."""
        if self._ended:
            return
        self._ended = True
        end_ns = time.time_ns() if end_ns is None else end_ns
        turn = self.turn
        otel = turn.otel
        attributes: dict[str, Any] = {}
        metric = self.metric_attributes
        if response is None:
            status, error_type, chars = "cancelled", "cancelled", 0
        else:
            status = _status_of(response)
            chars = response.content_length
            error_type = None
            if response.status != "success":
                if self.error_type == MCP_TOOL_ERROR and response.error_type == "mcp_tool_error":
                    error_type = MCP_TOOL_ERROR  # [MCP]: isError is reported as tool_error
                else:
                    error_type = response.error_type or ERROR_TYPE_OTHER
            metric[GEN_AI_TOOL_NAME] = metric_tool_name(response.name, response.error_type)
            attributes[CALL_PERSISTED] = bool(response.persisted_output_files)
            if turn.capture and error_type is None:
                attributes[GEN_AI_TOOL_CALL_RESULT] = bounded(
                    _result_content(response), MAX_CONTENT_CHARS
                )
        attributes[CALL_STATUS] = status
        attributes[CALL_CHARS] = chars
        metric[CALL_STATUS] = status
        if error_type is not None:
            error_type = bounded(error_type)
            attributes[ERROR_TYPE] = error_type
            metric[ERROR_TYPE] = error_type
            # Recording Errors: no description, the message may hold the call's content.
            self.span.set_status(otel.trace.StatusCode.ERROR)
        self._attributes = attributes
        self._end_ns = end_ns
        turn.finished.append(self)
        # [GENAI-METRICS]: the same value as the span's duration.
        instruments = otel.meters()
        instruments.tool_duration.record((end_ns - self._start_ns) / 1e9, metric)
        if chars:  # summed per tool, added once per turn
            produced = turn.produced
            tool = metric[GEN_AI_TOOL_NAME]
            produced[tool] = produced.get(tool, 0) + chars

    def close(self, final: ToolCallResponse | None) -> None:
        """End the span at the time the call ended; ``final`` is the call's response as the
        turn completed it (its persisted state is the one reported), if known."""
        if final is not None and CALL_PERSISTED in self._attributes:
            self._attributes[CALL_PERSISTED] = bool(final.persisted_output_files)
        self.span.set_attributes(self._attributes)
        self.span.end(end_time=self._end_ns)


class _CallScope:
    """Makes a call's span current while its worker runs it (approval and producer)."""

    __slots__ = ("_context_token", "_record", "_token")

    def __init__(self, record: CallTelemetry) -> None:
        self._record = record
        self._token: Token[CallTelemetry | None] | None = None
        self._context_token: object = None

    def __enter__(self) -> None:
        self._start()

    @never_raises
    def _start(self) -> None:
        record = self._record
        turn = record.turn
        otel = turn.otel
        self._context_token = otel.context.attach(
            otel.trace.set_span_in_context(record.span, turn.context)
        )
        self._token = _CALL.set(record)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _CALL.reset(self._token)
        if self._context_token is not None:
            self._record.turn.otel.context.detach(self._context_token)


def call_scope(record: CallTelemetry) -> _CallScope:
    """``with call_scope(record):`` around running one call: its span is current."""
    return _CallScope(record)


class TurnTelemetry:
    """One batch's ``toolbatch.turn`` span, its calls and what its steps counted."""

    __slots__ = (
        "artifact_bytes",
        "artifact_failures",
        "artifacts",
        "calls",
        "capture",
        "context",
        "executed_ns",
        "finished",
        "hooks",
        "hooks_context",
        "hooks_failed",
        "hooks_replaced",
        "otel",
        "produced",
        "responses_cut",
        "slots_cut",
        "span",
        "start_ns",
    )

    def __init__(self, otel: Otel, session_id: str | None) -> None:
        self.otel = otel
        self.capture = capture_content()
        self.start_ns = time.time_ns()
        self.executed_ns: int | None = None
        attributes = {GEN_AI_CONVERSATION_ID: bounded(session_id)} if session_id else None
        parent = otel.context.get_current() if otel.context is not None else None
        self.span = otel.tracer().start_span(
            SPAN_TURN,
            context=parent,
            kind=otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self.start_ns,
        )
        self.context = otel.trace.set_span_in_context(self.span, parent)
        self.calls: set[CallTelemetry] = set()
        """Calls started and not finished yet (ended with the turn)."""
        self.finished: list[CallTelemetry] = []
        """Calls finished, their spans still open: they end with the turn (``close``)."""
        self.artifacts = 0
        self.artifact_bytes = 0
        self.artifact_failures = 0
        self.hooks = 0
        self.hooks_failed = 0
        self.hooks_context = 0
        self.hooks_replaced = 0
        self.slots_cut = 0
        self.produced: dict[str, int] = {}
        self.responses_cut = 0

    # -- calls ----------------------------------------------------------------------------

    @never_raises
    def start_call(self, call: ToolCall) -> CallTelemetry:
        """A worker takes ``call``: its span starts (a child of the turn's)."""
        record = CallTelemetry(self, call)
        self.calls.add(record)
        return record

    @never_raises
    def call_finished(
        self, record: CallTelemetry | None, call: ToolCall, response: ToolCallResponse | None
    ) -> None:
        """The scheduler reported ``call`` finished (``record``: ``None`` for a call answered
        in place, which never ran)."""
        if record is None:
            now = time.time_ns()
            CallTelemetry(self, call, now).finish(response, now)
            return
        self.calls.discard(record)
        record.finish(response)

    def _answered_by_runtime(self, responses: Iterable[ToolCallResponse]) -> None:
        for response in responses:
            now = time.time_ns()
            CallTelemetry(self, _CallOf(response), now).finish(response, now)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The turn's span is current here (and ``current_turn()`` is this turn)."""
        token = _TURN.set(self)
        context_token = self.otel.context.attach(self.context)
        try:
            yield
        finally:
            self.otel.context.detach(context_token)
            _TURN.reset(token)

    def mark_executed(self) -> None:
        """``execute`` returned: a turn never completed ends at this time."""
        self.executed_ns = time.time_ns()

    # -- steps ----------------------------------------------------------------------------

    def note_cuts(self, slots_cut: int, responses_cut: int) -> None:
        """A finalize pass cut this much (the turn keeps the larger of its two passes)."""
        self.slots_cut = max(self.slots_cut, slots_cut)
        self.responses_cut = max(self.responses_cut, responses_cut)

    def note_artifact(self, nbytes: int | None) -> None:
        """An artifact was written (``nbytes``) or could not be (``None``)."""
        if nbytes is None:
            self.artifact_failures += 1
        else:
            self.artifacts += 1
            self.artifact_bytes += nbytes

    def note_hook(self, outcome: str, replaced: int) -> None:
        """A hook ran and ended with ``outcome``."""
        self.hooks += 1
        if outcome == "failed":
            self.hooks_failed += 1
        if outcome == "context":
            self.hooks_context += 1
        self.hooks_replaced += replaced

    # -- the end --------------------------------------------------------------------------

    def _end_calls(self, end_ns: int | None = None, final: Sequence[ToolCallResponse] = ()) -> None:
        for record in self.calls:
            record.finish(None, end_ns)
        self.calls.clear()
        by_id: dict[str, list[ToolCallResponse]] = {}
        for response in reversed(final):
            by_id.setdefault(bounded(response.call_id), []).append(response)
        for record in self.finished:
            same = by_id.get(record.call_id)
            record.close(same.pop() if same else None)
        self.finished.clear()
        produced = self.otel.meters().output_produced
        for tool, chars in self.produced.items():
            produced.add(chars, {GEN_AI_TOOL_NAME: tool})
        self.produced.clear()

    def _counts(self) -> dict[str, Any]:
        return {
            TURN_SLOTS_CUT: self.slots_cut,
            TURN_RESPONSES_CUT: self.responses_cut,
            TURN_ARTIFACTS: self.artifacts,
            TURN_ARTIFACT_BYTES: self.artifact_bytes,
            TURN_ARTIFACT_FAILURES: self.artifact_failures,
            TURN_HOOKS: self.hooks,
            TURN_HOOKS_FAILED: self.hooks_failed,
            TURN_HOOKS_CONTEXT: self.hooks_context,
            TURN_HOOKS_REPLACED: self.hooks_replaced,
        }

    @never_raises
    def end_not_completed(self) -> None:
        """End a turn whose ``execute`` was never followed by ``complete_turn``."""
        end_ns = self.executed_ns if self.executed_ns is not None else time.time_ns()
        self._end_calls(end_ns)
        self.span.set_attributes({**self._counts(), TURN_COMPLETED: False})
        self.span.end(end_time=end_ns)

    @never_raises
    def end_failed(self, exc: BaseException) -> None:
        """End the turn with the exception that stopped it."""
        self._end_calls()
        otel = self.otel
        turn = getattr(exc, "turn", None)  # RecorderError: completed, but not recorded
        if turn is not None:
            self._record_turn(turn, None)
        attributes = {**self._counts(), TURN_COMPLETED: turn is not None}
        if isinstance(exc, Exception):
            attributes[ERROR_TYPE] = type(exc).__qualname__
            self.span.record_exception(exc)
            self.span.set_status(otel.trace.StatusCode.ERROR)
        else:  # cancelled (or the process is stopping): not an error of the turn
            attributes[ERROR_TYPE] = "cancelled"
        self.span.set_attributes(attributes)
        self.span.end()

    def _record_turn(self, turn: Turn, budget: int | None) -> None:
        sent_by_tool: dict[str, int] = {}
        for response in turn.responses:
            if response.content_length:
                tool = metric_tool_name(response.name, response.error_type)
                sent_by_tool[tool] = sent_by_tool.get(tool, 0) + response.content_length
        sent = self.otel.meters().output_sent
        for tool, chars in sent_by_tool.items():
            sent.add(chars, {GEN_AI_TOOL_NAME: tool})
        attributes: dict[str, Any] = {
            TURN_CALLS: len(turn.responses),
            TURN_ERRORS: sum(1 for r in turn.responses if r.status != "success"),
            TURN_CHARS: turn.content_length,
            TURN_STOPPED: turn.stop_reason is not None,
        }
        if budget is not None:
            attributes[TURN_BUDGET] = budget
        self.span.set_attributes(attributes)

    @never_raises
    def end_completed(
        self, answered_by_runtime: Iterable[ToolCallResponse], turn: Turn, budget: int | None
    ) -> None:
        """End the turn ``complete_turn`` returned (``answered_by_runtime``: the responses
        the runtime added, which get their call spans here)."""
        self._answered_by_runtime(answered_by_runtime)
        self._end_calls(final=turn.responses)
        self._record_turn(turn, budget)
        self.span.set_attributes({**self._counts(), TURN_COMPLETED: True})
        self.span.end()


class _CallOf:
    """What a call span needs of a call the runtime answered itself (no ``ToolCall`` here)."""

    __slots__ = ("args", "id", "name")

    def __init__(self, response: ToolCallResponse) -> None:
        self.id = response.call_id
        self.name = response.name
        self.args = response.call_args if response.call_args is not None else {}


def begin_turn(session_id: str | None) -> TurnTelemetry | None:
    """A new turn span, a child of the span current here; ``None`` when nothing records
    (or telemetry itself failed: the batch then runs untraced)."""
    otel = recording()
    if otel is None:
        return None
    return _begin(otel, session_id)


@never_raises
def _begin(otel: Otel, session_id: str | None) -> TurnTelemetry:
    return TurnTelemetry(otel, session_id)
