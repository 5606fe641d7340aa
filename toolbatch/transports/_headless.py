"""Headless output adapters: ``text``, ``json``, ``stream-json`` and Dual Output.

Every event of a headless run goes through one ``OutputAdapter``: it builds each event
once, bounds ``tool_result.content`` there, and hands the event to its sinks (the main
stream in the chosen format, plus the Dual Output sidecar when one is given). The shapes
follow Claude Code's and Qwen Code's ``stream-json``, so their SDK parsers read them.

Events (one JSON object each; ``stream-json`` writes one per line)::

    init         {"type": "system", "subtype": "init", "uuid", "session_id", "model",
                  "tools": [str], "cwd",
                  "mcp_servers": [{"name", "status"}] (when given: "pending" while a
                                 server starts, "connected", "failed", "disabled")}
    message      {"type": "assistant", "uuid", "session_id", "parent_tool_use_id",
                  "message": {"role": "assistant", "model", "stop_reason": null,
                              "content": [{"type": "text", "text"}]}}
    tool_use     {"type": "assistant", "uuid", "session_id", "parent_tool_use_id",
                  "message": {"role": "assistant", "model", "stop_reason": "tool_use",
                              "content": [{"type": "tool_use", "id", "name", "input"}]}}
    tool_result  {"type": "user", "uuid", "session_id", "parent_tool_use_id",
                  "message": {"role": "user",
                              "content": [{"type": "tool_result", "tool_use_id",
                                           "content": str, "is_error": bool}]}}
    tool_progress {"type": "tool_progress", "uuid", "session_id", "tool_use_id",
                  "tool_name", "parent_tool_use_id", "elapsed_time_seconds",
                  "status": "started" | "running" | "finished",
                  "output_bytes": int (when known), "message": str (the tool's latest
                  progress report, when any), "is_error": bool (with "finished")}
                  (``stream-json`` only, live: a call's progress as it runs; what the
                  model receives is the ``tool_result`` events, after the turn completes)
    result       {"type": "result", "subtype": "success" | "error_during_execution",
                  "uuid", "session_id", "is_error", "duration_ms", "num_turns",
                  "result": str (success; also on failure when the run still produced
                            one, such as the turn of an interrupted run),
                  "error": {"message"} (failure),
                  "budget": {"limit_chars", "used_chars"} (when given),
                  "stop_reason": str (when a hook stopped the run)}

``result.result`` is the run's answer for programs (``toolbatch run`` puts the model-facing
parts there as a JSON string); the ``text`` format may show people a rendering of it
instead (``result(text=...)``), which no event ever carries.

``tool_result.content`` is the response's display text (``display_text``: ``display`` when
it is a non-blank string, the ``text`` of a display object that has a string ``text``, as
MCP results do, else a JSON rendering of a non-null ``display``, else the error message,
else the model-facing text), then one line per media part (``[image/png image, 4,033
bytes]``). It is bounded to ``HEADLESS_TOOL_RESULT_JSON_BYTES`` (65,536 UTF-8 bytes of
``JSON.stringify``) by ``project_json_string``. That is the only bound: not
an event, frame or session limit. Calls and responses are read, never changed, and
internal state such as ``persisted_output_files`` never reaches the wire.

Formats:
    ``text``: only the final answer (its rendering for people when one was given, else the
    ``result`` text), then ``Error: <message>`` when the run failed.
    ``json``: one JSON array of all events, written by ``close()``.
    ``stream-json``: JSON Lines, one event per ``write`` call, flushed as it happens;
    the only format with ``tool_progress`` events.
    Dual Output (``dual_output=``): the ``stream-json`` events to a sidecar, opened by a
    ``{"type": "system", "subtype": "session_start", "data": {"protocol_version": 2,
    ...}}`` handshake and closed by ``session_end``. Version 2 is the one whose
    ``tool_result.content`` is bounded. A sidecar that fails to write is dropped (logged),
    the main output carries on.

Lines are ``JSON.stringify``-compatible UTF-8 (lone surrogates escaped as ``\\udXXX``) and
end with ``"\\n"``, the only frame separator: U+2028 and U+2029 stay raw inside strings,
so readers must split on ``"\\n"``, never with ``str.splitlines()``.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Literal, Protocol, TextIO, TypeAlias

import structlog

from toolbatch._core import ToolCall, ToolCallResponse
from toolbatch.errors import ConfigError
from toolbatch.transports._display import tool_result_content
from toolbatch.transports._json_string import (
    HEADLESS_MARKER,
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    join_surrogate_pair,
    project_json_string,
)

__all__ = [
    "DUAL_OUTPUT_PROTOCOL_VERSION",
    "OutputAdapter",
    "OutputFormat",
    "ProgressStatus",
    "make_output_adapter",
]

log = structlog.get_logger(__name__)

OutputFormat: TypeAlias = Literal["text", "json", "stream-json"]
"""The main output's format."""
ProgressStatus: TypeAlias = Literal["started", "running", "finished"]
"""Where a call is, in a ``tool_progress`` event."""

DUAL_OUTPUT_PROTOCOL_VERSION: Final = 2
"""Sidecar protocol: 1 was unbounded; 2 bounds textual ``tool_result.content``."""

_FORMATS: Final[tuple[OutputFormat, ...]] = ("text", "json", "stream-json")
_SIDECAR_EVENTS: Final = ("system", "assistant", "user", "result")
_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")

Event: TypeAlias = dict[str, Any]


def make_output_adapter(
    format: OutputFormat, stream: TextIO, *, dual_output: TextIO | None = None
) -> OutputAdapter:
    """The adapter that writes a headless run to ``stream`` in ``format``.

    Args:
        format: ``"text"``, ``"json"`` or ``"stream-json"``.
        stream: the main output, a UTF-8 text stream (usually ``sys.stdout``). The adapter
            writes and flushes it but never closes it.
        dual_output: a sidecar text stream for Dual Output (protocol version 2), usually
            a file opened by the caller; it gets the ``stream-json`` events whatever the
            main format. Never closed by the adapter either.

    Raises:
        ConfigError: ``format`` is not one of the three formats.
    """
    sinks: list[_Sink] = []
    if format == "text":
        sinks.append(_TextSink(stream))
    elif format == "json":
        sinks.append(_JsonDocumentSink(stream))
    elif format == "stream-json":
        sinks.append(_JsonLinesSink(stream))
    else:
        raise ConfigError(
            f"output format must be one of {', '.join(map(repr, _FORMATS))}, got {format!r}"
        )
    if dual_output is not None:
        sinks.append(_SidecarSink(dual_output))
    return OutputAdapter(sinks)


class _Sink(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


class OutputAdapter:
    """The one boundary every headless event goes through; build it with ``make_output_adapter``.

    Call ``init`` first, then ``assistant_message``, ``tool_use`` and ``tool_result`` as the
    run goes, ``result`` at the end and ``close`` last (or use it as a context manager,
    which closes it). Not thread-safe: call it from one thread (or one event loop).
    """

    def __init__(self, sinks: Sequence[_Sink]) -> None:
        self._sinks = list(sinks)
        self._session_id: str | None = None
        self._model: str | None = None
        self._started = time.perf_counter()
        self._last_text = ""
        self._closed = False

    def __enter__(self) -> OutputAdapter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def init(
        self,
        session_id: str,
        tools: Sequence[str],
        *,
        model: str | None = None,
        cwd: str | None = None,
        mcp_servers: Mapping[str, str] | None = None,
    ) -> None:
        """Announce the session: its id, the tool names on offer and the model.

        Args:
            session_id: carried by every later event.
            tools: the names of the tools the model may call.
            model: the model's name, if known.
            cwd: the working directory to report; the process's when omitted.
            mcp_servers: each configured MCP server's status by name (``pending`` while it
                starts: its tools are not in ``tools`` yet).
        """
        self._session_id = session_id
        self._model = model
        self._started = time.perf_counter()
        for sink in self._sinks:
            if isinstance(sink, _SidecarSink):
                sink.start(session_id, self._base("system"))
        event: Event = {
            **self._base("system"),
            "subtype": "init",
            "model": model,
            "tools": list(tools),
            "cwd": os.getcwd() if cwd is None else cwd,
        }
        if mcp_servers is not None:
            event["mcp_servers"] = [
                {"name": name, "status": status} for name, status in mcp_servers.items()
            ]
        self._emit(event)

    def tool_progress(
        self,
        call: ToolCall,
        *,
        status: ProgressStatus,
        elapsed_s: float,
        output_bytes: int | None = None,
        message: str | None = None,
        is_error: bool | None = None,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A running call's live progress (``stream-json`` only; other formats skip it).

        Args:
            call: the call.
            status: ``started``, ``running`` or ``finished``.
            elapsed_s: seconds since the call started.
            output_bytes: the output it produced so far, when known.
            message: its latest progress report, if any.
            is_error: with ``finished``: whether the call failed.
            parent_tool_use_id: the call of a subagent's parent, if any.
        """
        event: Event = {
            "type": "tool_progress",
            "uuid": str(uuid.uuid4()),
            "session_id": self._session_id,
            "tool_use_id": call.id,
            "tool_name": call.name,
            "parent_tool_use_id": parent_tool_use_id,
            "elapsed_time_seconds": round(elapsed_s, 3),
            "status": status,
        }
        if output_bytes is not None:
            event["output_bytes"] = output_bytes
        if message is not None:
            event["message"] = message
        if is_error is not None:
            event["is_error"] = is_error
        for sink in self._sinks:
            if type(sink) is _JsonLinesSink:  # live only: not the document, not the sidecar
                sink.emit(event)

    def assistant_message(self, text: str, *, parent_tool_use_id: str | None = None) -> None:
        """The model's text for this turn (the last one is the run's default result)."""
        if parent_tool_use_id is None:
            self._last_text = text
        self._emit(self._assistant([{"type": "text", "text": text}], None, parent_tool_use_id))

    def tool_use(self, call: ToolCall, *, parent_tool_use_id: str | None = None) -> None:
        """A tool call the model made; ``call.args`` is sent as ``input``, unbounded."""
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
        self._emit(self._assistant([block], "tool_use", parent_tool_use_id))

    def tool_result(
        self,
        call: ToolCall,
        response: ToolCallResponse,
        *,
        parent_tool_use_id: str | None = None,
    ) -> None:
        """A call's response; its display value is bounded to 65,536 bytes of JSON."""
        content = tool_result_content(response)
        bounded = project_json_string(
            content, max_bytes=HEADLESS_TOOL_RESULT_JSON_BYTES, marker=HEADLESS_MARKER
        )
        if bounded is not content:
            log.debug(
                "transports.tool_result_projected",
                tool_use_id=call.id,
                chars=len(content),
                projected_chars=len(bounded),
            )
        block = {
            "type": "tool_result",
            "tool_use_id": call.id,
            "content": bounded,
            "is_error": response.status != "success",
        }
        self._emit(
            {
                **self._base("user"),
                "parent_tool_use_id": parent_tool_use_id,
                "message": {"role": "user", "content": [block]},
            }
        )

    def result(
        self,
        *,
        num_turns: int,
        is_error: bool = False,
        error: str | None = None,
        result: str | None = None,
        text: str | None = None,
        duration_ms: float | None = None,
        budget_chars: int | None = None,
        budget_used_chars: int | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """The run's outcome.

        Args:
            num_turns: how many model turns the run took.
            is_error: whether the run failed (``subtype`` ``error_during_execution``).
            error: why it failed (when ``is_error``).
            result: the final answer every event format carries; when omitted, the last
                assistant message of a successful run (a failed run then has none).
            text: what the ``text`` format shows instead of ``result``: a rendering for
                people. Never written to any event (the JSON formats and the Dual Output
                sidecar carry ``result``).
            duration_ms: the run's wall time; the time since ``init`` when omitted.
            budget_chars: the aggregate tool-output budget, if one applied.
            budget_used_chars: model-facing tool-output characters sent, if known.
            stop_reason: why a hook stopped the run, if one did (``stop_reason`` in the
                event).
        """
        if duration_ms is None:
            duration_ms = (time.perf_counter() - self._started) * 1000
        event: Event = {
            **self._base("result"),
            "subtype": "error_during_execution" if is_error else "success",
            "is_error": is_error,
            "duration_ms": round(duration_ms, 3),
            "num_turns": num_turns,
        }
        if is_error:
            event["error"] = {"message": error or "unknown error"}
            if result is not None:
                event["result"] = result
        else:
            event["result"] = self._last_text if result is None else result
        if budget_chars is not None or budget_used_chars is not None:
            event["budget"] = {"limit_chars": budget_chars, "used_chars": budget_used_chars}
        if stop_reason is not None:
            event["stop_reason"] = stop_reason
        self._emit(event, text=text)

    def close(self) -> None:
        """Finish the output (the ``json`` document, the sidecar's ``session_end``); idempotent."""
        if self._closed:
            return
        self._closed = True
        for sink in self._sinks:
            sink.close()

    def _base(self, kind: str) -> Event:
        return {"type": kind, "uuid": str(uuid.uuid4()), "session_id": self._session_id}

    def _assistant(
        self, content: list[Event], stop_reason: str | None, parent_tool_use_id: str | None
    ) -> Event:
        return {
            **self._base("assistant"),
            "parent_tool_use_id": parent_tool_use_id,
            "message": {
                "role": "assistant",
                "model": self._model,
                "content": content,
                "stop_reason": stop_reason,
            },
        }

    def _emit(self, event: Event, *, text: str | None = None) -> None:
        if self._closed:
            raise ConfigError(
                f"the output adapter is closed; cannot emit a {event['type']!r} event "
                f"after close(): emit every event first"
            )
        for sink in self._sinks:
            if isinstance(sink, _TextSink):
                sink.emit(event, text=text)
            else:
                sink.emit(event)


def _printable(text: str) -> str:
    """``text`` writable to any UTF-8 stream: halves joined, lone surrogates as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", _SURROGATE_PAIR.sub(join_surrogate_pair, text))
    return text


class _TextSink:
    """The final answer only (its rendering for people, when given), then any error."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def emit(self, event: Event, *, text: str | None = None) -> None:
        if event["type"] != "result":
            return
        shown = [text if text is not None else event.get("result") or ""]
        if event["is_error"]:
            shown.append(f"Error: {event['error']['message']}")
        for piece in shown:
            if piece:
                piece = _printable(piece)
                self._stream.write(piece if piece.endswith("\n") else piece + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


class _JsonDocumentSink:
    """All events as one JSON array, written at close."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lines: list[str] = []

    def emit(self, event: Event) -> None:
        self._lines.append(dumps_json_line(event))

    def close(self) -> None:
        self._stream.write("[" + ",".join(self._lines) + "]\n")
        self._stream.flush()
        self._lines.clear()


class _JsonLinesSink:
    """One event per line, one ``write`` per line, flushed at once."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def emit(self, event: Event) -> None:
        self._stream.write(dumps_json_line(event) + "\n")
        self._stream.flush()

    def close(self) -> None:
        self._stream.flush()


class _SidecarSink(_JsonLinesSink):
    """Dual Output: JSON Lines between a ``session_start`` and a ``session_end`` event.

    A sidecar that fails to write is dropped, so a vanished consumer never breaks the run.
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._active = True
        self._session_id: str | None = None
        self._base: Event = {}

    def start(self, session_id: str, base: Event) -> None:
        self._session_id = session_id
        self._base = base
        data = {
            "session_id": session_id,
            "protocol_version": DUAL_OUTPUT_PROTOCOL_VERSION,
            "supported_events": list(_SIDECAR_EVENTS),
        }
        self.emit({**base, "subtype": "session_start", "data": data})

    def emit(self, event: Event) -> None:
        if not self._active:
            return
        try:
            super().emit(event)
        except (OSError, ValueError) as exc:
            self._active = False
            log.warning("transports.dual_output_disabled", error=str(exc))

    def close(self) -> None:
        if self._session_id is not None:
            end = {**self._base, "uuid": str(uuid.uuid4()), "subtype": "session_end"}
            self.emit({**end, "data": {"session_id": self._session_id}})
        if self._active:
            try:
                super().close()
            except (OSError, ValueError) as exc:
                self._active = False
                log.warning("transports.dual_output_disabled", error=str(exc))
