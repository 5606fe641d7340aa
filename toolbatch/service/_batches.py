"""The batch runner's side of the service: the backend it drives, each batch's
``batch/progress`` notifications, and the ``batch/run`` answer, streamed out in slices.

A ``batch/run`` answer is not built whole: it is serialized ``STREAM_SLICE`` (1,000)
responses at a time as the writer reaches it, and what was written is released. Until it
is written it counts toward the output's high-water mark by an estimate of its size
(``ANSWER_BASE_BYTES`` plus ``ANSWER_RESPONSE_BYTES`` per response plus twice its text; a
"queued" progress line ``QUEUED_LINE_BYTES``), see ``toolbatch.service._output``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Final, Protocol

import anyio
import structlog
from pydantic import JsonValue

from toolbatch._core import (
    BatchObserver,
    Part,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
    parts_adapter,
)
from toolbatch.service._protocol import INTERNAL_ERROR
from toolbatch.transports import (
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    project_json_string,
)

__all__ = [
    "STREAM_SLICE",
    "BatchBackend",
    "batch_result",
    "bounded_display",
]

log = structlog.get_logger("toolbatch.service")

SERVICE_DISPLAY_JSON_BYTES: Final = HEADLESS_TOOL_RESULT_JSON_BYTES
"""The most a response's ``display`` takes on the wire, in UTF-8 bytes of its JSON."""
SERVICE_MARKER: Final = "\n[... truncated for the stdio service ...]\n"
QUEUED_LINE_BYTES: Final = 128
"""What one "queued" progress line counts toward ``OUTPUT_HIGH_WATER_BYTES`` until written."""
ANSWER_BASE_BYTES: Final = 1_024
ANSWER_RESPONSE_BYTES: Final = 256
"""A queued ``batch/run`` answer counts ``ANSWER_BASE_BYTES``, this much per response and
twice its model-facing text (in ``responses`` and in ``parts``) until it is written."""
STREAM_SLICE: Final = 1_000
"""A ``batch/run`` answer is serialized this many responses (or parts) at a time."""


class BatchBackend(Protocol):
    """What the service runs batches with; the CLI wires a ``ToolScheduler`` behind it."""

    @property
    def default_budget(self) -> int | None:
        """The budget of a batch that gives none (``None``: no budget)."""
        ...

    async def wait_for_tools(self) -> Sequence[ToolDeclaration]:
        """Every tool a batch may call, once the MCP servers have started or failed."""
        ...

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        /,
        *,
        budget: int | None,
        abort: anyio.Event,
        observer: BatchObserver,
    ) -> Turn:
        """Run ``calls`` and return the turn finalized against ``budget`` (``None``: none)."""
        ...


class _ProgressSink(Protocol):
    """Where a batch's progress goes: the service's output."""

    def notify(
        self, method: str, params: dict[str, JsonValue], *, droppable: bool = False
    ) -> None: ...

    def enqueue_stream(self, lines: Iterator[str], size: int) -> None: ...


class _BatchProgress:
    """Turns one batch's observer events into ``batch/progress`` notifications."""

    def __init__(self, service: _ProgressSink, request_id: object) -> None:
        self._service = service
        self._request_id = request_id

    def _notify(self, call: ToolCall, status: str, message: str | None = None) -> None:
        params: dict[str, JsonValue] = {
            "request_id": self._request_id,  # type: ignore[dict-item]  # a checked id
            "call_id": call.id,
            "index": call.ordinal,
            "status": status,
        }
        if message is not None:
            params["message"] = message
        self._service.notify("batch/progress", params, droppable=message is not None)

    def queued(self, calls: Sequence[ToolCall]) -> None:
        # One "queued" line per call, made as the writer gets to them: a 100,000-call
        # batch does not queue 100,000 lines before its first call runs.
        self._service.enqueue_stream(self._queued_lines(calls), QUEUED_LINE_BYTES * len(calls))

    def _queued_lines(self, calls: Sequence[ToolCall]) -> Iterator[str]:
        for call in calls:
            params = {
                "request_id": self._request_id,
                "call_id": call.id,
                "index": call.ordinal,
                "status": "queued",
            }
            message = {"jsonrpc": "2.0", "method": "batch/progress", "params": params}
            yield dumps_json_line(message) + "\n"

    def call_started(self, call: ToolCall) -> None:
        self._notify(call, "running")

    def call_progress(self, call: ToolCall, message: str) -> None:
        self._notify(call, "running", message)

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        self._notify(call, response.status)


# -- the batch/run answer ----------------------------------------------------------------


def _dump_parts(parts: Sequence[Part]) -> list[JsonValue]:
    dumped: list[JsonValue] = parts_adapter.dump_python(
        list(parts), mode="json", by_alias=True, exclude_none=True
    )
    return dumped


def bounded_display(display: JsonValue) -> JsonValue:
    """``display`` within ``SERVICE_DISPLAY_JSON_BYTES`` of JSON on the wire."""
    if isinstance(display, str):
        return project_json_string(display, SERVICE_DISPLAY_JSON_BYTES, SERVICE_MARKER)
    if display is None or isinstance(display, bool | int | float):
        return display
    rendered = json.dumps(display, ensure_ascii=False)
    if len(rendered) * 6 <= SERVICE_DISPLAY_JSON_BYTES:
        return display  # cannot be over the bound: no byte count needed
    projected = project_json_string(rendered, SERVICE_DISPLAY_JSON_BYTES, SERVICE_MARKER)
    return display if projected is rendered else projected


def batch_result(turn: Turn) -> dict[str, JsonValue]:
    """The ``batch/run`` result for a completed turn (never ``persisted_output_files``)."""
    result: dict[str, JsonValue] = {
        "responses": [
            {
                "call_id": response.call_id,
                "name": response.name,
                "status": response.status,
                "parts": _dump_parts(response.parts),
                "display": bounded_display(response.display),
            }
            for response in turn.responses
        ],
        "parts": _dump_parts(turn.parts),
    }
    if turn.stop_reason is not None:
        result["stop_reason"] = turn.stop_reason
    return result


def _streamed_answer(request_id: object, turn: Turn) -> Iterator[str]:
    """The ``batch/run`` answer line for ``turn``, in pieces, dropping what was written.

    Byte for byte ``dumps_json_line({"jsonrpc", "id", "result": batch_result(turn)})``, but
    never more than ``STREAM_SLICE`` responses' JSON at once: a 100,000-call answer does
    not have to exist whole, as dicts, as a string and as bytes, before its first byte is
    written. The responses it has written are released as it goes. Should serializing
    fail half-way (it has a fallback for every value, so it should not), the torn line is
    ended and a ``-32603`` error for the request follows on its own line.
    """
    pieces = _answer_pieces(request_id, turn)
    del turn  # the pieces release each response once written; nothing else may hold them
    try:
        yield from pieces
    except Exception as exc:
        log.exception("service.answer_failed", request_id=request_id)
        error = {"code": INTERNAL_ERROR, "message": f"the answer could not be written: {exc!r}"}
        yield "\n" + dumps_json_line({"jsonrpc": "2.0", "id": request_id, "error": error}) + "\n"


def _answer_pieces(request_id: object, turn: Turn) -> Iterator[str]:
    responses: list[ToolCallResponse | None] = list(turn.responses)
    parts = list(turn.parts)
    stop_reason = turn.stop_reason
    del turn
    yield '{"jsonrpc":"2.0","id":' + dumps_json_line(request_id) + ',"result":{"responses":['  # type: ignore[arg-type]  # a checked id
    for start in range(0, len(responses), STREAM_SLICE):
        chunk: list[JsonValue] = []
        for index in range(start, min(start + STREAM_SLICE, len(responses))):
            response = responses[index]
            assert response is not None
            responses[index] = None
            chunk.append(
                {
                    "call_id": response.call_id,
                    "name": response.name,
                    "status": response.status,
                    "parts": _dump_parts(response.parts),
                    "display": bounded_display(response.display),
                }
            )
        yield ("," if start else "") + dumps_json_line(chunk)[1:-1]
    yield '],"parts":['
    for start in range(0, len(parts), STREAM_SLICE):
        piece = dumps_json_line(_dump_parts(parts[start : start + STREAM_SLICE]))[1:-1]
        yield ("," if start else "") + piece
    tail = "]"
    if stop_reason is not None:
        tail += ',"stop_reason":' + dumps_json_line(stop_reason)
    yield tail + "}}\n"
