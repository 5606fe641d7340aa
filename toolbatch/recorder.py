"""The session transcript: an append-only JSONL file, written ahead of sending.

Every completed tool turn is appended, flushed and fsynced before its parts are handed to the
model, so a crash after the model saw a turn never loses its record. A record keeps the parts
exactly as sent plus recorder-only metadata (each response's status, kind,
``persisted_output_files`` and the files its media parts were saved to, and the turn's stop
reason) so a resumed session can reuse artifacts. The agent loop also records the user's and
the model's messages, so a session can be resumed whole.

Record shapes (one JSON object per line; unknown fields are ignored, missing optional
fields take their defaults, so transcripts written before a field existed still load)::

    {"type": "tool_turn", "v": 1, "seq": 3, "session_id": "...", "parts": [<wire parts>],
     "stop_reason": str | null,
     "responses": [{"call_id", "name", "status", "kind", "error", "error_type",
                    "part_count", "content_length", "persisted_output_files": [...],
                    "media_files": {"<part index>": path}}]}

The parts after the responses' own (``part_count`` each) are the turn's context parts.
    {"type": "message", "v": 1, "seq": 4, "role": "user" | "model",
     "parts": [<wire parts>], "tool_calls": [{"id", "name", "args"}]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeAlias, runtime_checkable

import anyio
import anyio.to_thread
import structlog
from pydantic import ValidationError

from toolbatch._core import (
    InlineDataPart,
    Part,
    ReplacedFileError,
    ToolCall,
    ToolCallResponse,
    Turn,
    UserFile,
    parts_adapter,
)
from toolbatch.errors import ConfigError, RecorderError

__all__ = [
    "JsonlRecorder",
    "RecordedTurn",
    "Recorder",
    "load_session",
]

log = structlog.get_logger("toolbatch.recorder")

ResponseKind: TypeAlias = Literal["executed", "duplicate", "skipped", "cancelled", "synthetic"]
"""How a response came to be in a turn."""


def response_kind(response: ToolCallResponse) -> ResponseKind:
    """The kind of a response, read from its status (and, for a call that never ran and
    was answered in place, its error type)."""
    if response.status in ("cancelled", "duplicate", "skipped"):
        return response.status
    if response.error_type in ("unknown_tool", "invalid_call", "invalid_args"):
        return "synthetic"
    return "executed"


RECORD_VERSION: Final = 1
_SCAN_BLOCK_BYTES: Final = 1 << 16


@runtime_checkable
class Recorder(Protocol):
    """Where completed turns go before they are sent. ``JsonlRecorder`` is the default.

    An agent loop also records the user's and the model's messages through
    ``record_message``, so the transcript holds the whole conversation.
    """

    async def record_turn(self, turn: Turn, *, kinds: Sequence[ResponseKind] | None = None) -> None:
        """Durably record ``turn`` (its parts exactly as they will be sent)."""
        ...

    async def record_message(
        self,
        role: Literal["user", "model"],
        parts: Sequence[Part],
        *,
        tool_calls: Sequence[ToolCall] = (),
    ) -> None:
        """Durably record a user or model message."""
        ...


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """One recorded entry of a session, in order.

    Attributes:
        type: ``"tool_turn"`` for a finalized batch of tool responses, ``"message"`` for a
            user or model message.
        parts: the parts exactly as they were sent.
        responses: for a tool turn, each response rebuilt from the record (its parts are
            slices of ``parts``; ``persisted_output_files`` and the media parts' saved
            files restored from the metadata).
        kinds: each response's kind.
        role: for a message, ``"user"`` or ``"model"``.
        tool_calls: for a model message, the calls it made.
        seq: the record's sequence number in the file.
        stop_reason: for a tool turn, why a hook stopped the agent after it (if it did).
    """

    type: Literal["tool_turn", "message"]
    parts: list[Part]
    responses: list[ToolCallResponse] = field(default_factory=list)
    kinds: list[ResponseKind] = field(default_factory=list)
    role: Literal["user", "model"] | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    seq: int = 0
    stop_reason: str | None = None

    def as_turn(self) -> Turn:
        """A tool turn as the ``Turn`` that was sent (its responses and parts)."""
        return Turn(responses=self.responses, parts=self.parts, stop_reason=self.stop_reason)


def _dump_parts(parts: Sequence[Part]) -> list[Any]:
    dumped: list[Any] = parts_adapter.dump_python(
        list(parts), mode="json", by_alias=True, exclude_none=True
    )
    return dumped


def _encode_line(record: dict[str, Any]) -> bytes:
    # ensure_ascii keeps lone surrogates representable and the file plain ASCII JSON.
    return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class JsonlRecorder:
    """Appends a session's turns to a JSONL file, fsynced before each turn is sent.

    Args:
        path: the transcript file (created 0600 with its directory if missing). An existing
            transcript is appended to (and made 0600); a torn last line left by a crash is
            cut off first. It is opened once, never through a symlink, and must be a regular
            file of this user; every record goes through that descriptor, after checking
            the path still names it: a transcript replaced underneath (say, by a command
            that made it a symlink) raises ``RecorderError`` and nothing is written
            anywhere. ``close()`` closes it.

    A failed append (a full disk, an I/O error, a failed fsync) raises ``RecorderError`` and
    leaves the file exactly as it was: it is cut back to its size before the append, so
    every complete record stays loadable and the next append, once there is room, works.
    (If even the cut fails, the next append cuts the fragment first.) A turn whose record
    raised was not recorded; the scheduler hands it to the runtime as ``exc.turn``.
        session_id: stored in each record (default: the file's stem).
    """

    def __init__(self, path: str | os.PathLike[str], *, session_id: str | None = None) -> None:
        self.path = Path(path)
        self.session_id = session_id if session_id is not None else self.path.stem
        self._seq: int | None = None
        self._file: UserFile | None = None
        self._torn = False
        self._lock = anyio.Lock()

    async def record_turn(self, turn: Turn, *, kinds: Sequence[ResponseKind] | None = None) -> None:
        """Append ``turn`` durably. ``kinds`` defaults to each response's own kind
        (:func:`response_kind`, read from its status): callers need not compute it."""
        if kinds is not None and len(kinds) != len(turn.responses):
            raise ConfigError(
                f"kinds has {len(kinds)} entries for {len(turn.responses)} responses; give "
                f"one kind per response"
            )
        responses = []
        for index, response in enumerate(turn.responses):
            files = response.persisted_output_files
            media = {
                str(position): str(part.inline_data.persisted_file)
                for position, part in enumerate(response.parts)
                if isinstance(part, InlineDataPart) and part.inline_data.persisted_file is not None
            }
            responses.append(
                {
                    "call_id": response.call_id,
                    "name": response.name,
                    "status": response.status,
                    "kind": kinds[index] if kinds is not None else response_kind(response),
                    "error": response.error,
                    "error_type": response.error_type,
                    "part_count": len(response.parts),
                    "content_length": response.content_length,
                    "persisted_output_files": None if files is None else [str(p) for p in files],
                    **({"media_files": media} if media else {}),
                }
            )
        await self._append(
            {
                "type": "tool_turn",
                "parts": _dump_parts(turn.parts),
                "responses": responses,
                "stop_reason": turn.stop_reason,
            }
        )

    async def record_message(
        self,
        role: Literal["user", "model"],
        parts: Sequence[Part],
        *,
        tool_calls: Sequence[ToolCall] = (),
    ) -> None:
        """Append a user or model message (the agent loop's side of the history)."""
        await self._append(
            {
                "type": "message",
                "role": role,
                "parts": _dump_parts(parts),
                "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in tool_calls],
            }
        )

    async def _append(self, record: dict[str, Any]) -> None:
        async with self._lock:
            if self._seq is None:
                self._seq = await anyio.to_thread.run_sync(self._prepare)
            seq = self._seq + 1
            line = _encode_line(
                {**record, "v": RECORD_VERSION, "seq": seq, "session_id": self.session_id}
            )
            with anyio.CancelScope(shield=True):
                # Shielded: once started, a record is either fully on disk or not at all.
                try:
                    await anyio.to_thread.run_sync(self._write, line)
                except RecorderError:
                    if self._torn:  # the file may end in a fragment: the next append cuts it
                        self._seq = None
                        self._torn = False
                    raise
            self._seq = seq

    def _prepare(self) -> int:
        """Open the file once (creating it), cut a torn last line, and return the last seq."""
        file = self._file
        if file is None:
            try:
                file = UserFile.open(self.path, append=True)
            except OSError as exc:
                raise RecorderError(
                    f"cannot open transcript {str(self.path)!r}: {exc.strerror or exc}; choose "
                    f"a writable path",
                    path=self.path,
                ) from exc
            self._file = file
        fd = file.fd
        try:
            file.check()
            size = os.fstat(fd).st_size
            keep = _line_start_before(fd, size)
            if keep < size:
                log.warning("recorder.torn_line_removed", path=str(self.path), bytes=size - keep)
                os.ftruncate(fd, keep)
                os.fsync(fd)
            if keep == 0:
                return 0
            last_start = _line_start_before(fd, keep - 1)
            last = os.pread(fd, keep - last_start, last_start)
        except OSError as exc:
            raise self._append_error(exc) from exc
        try:
            return int(json.loads(last).get("seq", 0))
        except (ValueError, AttributeError):
            return 0

    def _write(self, line: bytes) -> None:
        """Append ``line`` and fsync it, or leave the file exactly as it was and raise.

        The append goes through the descriptor opened first, once the path is checked to
        still name that file (a replaced transcript is reported, nothing is written). A
        failed write or fsync (a full disk, an I/O error) is undone by cutting the file
        back to its size before the append, so the next record never follows a fragment.
        """
        assert self._file is not None
        fd = self._file.fd
        try:
            self._file.check()
            start = os.fstat(fd).st_size
        except OSError as exc:
            raise self._append_error(exc) from exc
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            error = self._append_error(exc)
            try:
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError as cut_error:
                log.error("recorder.append_not_undone", path=str(self.path), error=str(cut_error))
                self._torn = True
                raise error from exc
            log.info("recorder.append_undone", path=str(self.path), error=str(exc))
            raise error from exc

    def close(self) -> None:
        """Close the transcript's descriptor (the next record opens it again)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._seq = None

    def _append_error(self, exc: OSError) -> RecorderError:
        fix = "free disk space or choose another path"
        if isinstance(exc, ReplacedFileError):
            fix = "the transcript was not followed elsewhere"
        return RecorderError(
            f"cannot append to transcript {str(self.path)!r}: {exc.strerror or exc}; the turn "
            f"was not recorded (the transcript is as it was); {fix}",
            path=self.path,
        )


def _line_start_before(fd: int, end: int) -> int:
    """The offset just after the last newline before ``end`` (0 if there is none)."""
    position = end
    while position > 0:
        start = max(0, position - _SCAN_BLOCK_BYTES)
        block = os.pread(fd, position - start, start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


def _with_media_files(parts: list[Part], media: object) -> list[Part]:
    if not isinstance(media, dict) or not media:
        return parts
    restored = list(parts)
    for position, path in media.items():
        index = int(position)
        part = restored[index] if 0 <= index < len(restored) else None
        if isinstance(part, InlineDataPart) and isinstance(path, str):
            data = part.inline_data.model_copy(update={"persisted_file": Path(path)})
            restored[index] = part.model_copy(update={"inline_data": data})
    return restored


def _rebuild_tool_turn(record: dict[str, Any], parts: list[Part]) -> RecordedTurn:
    responses: list[ToolCallResponse] = []
    kinds: list[ResponseKind] = []
    restored: list[Part] = []
    offset = 0
    for meta in record.get("responses", []):
        count = int(meta.get("part_count", 0))
        own = _with_media_files(parts[offset : offset + count], meta.get("media_files"))
        offset += count
        restored.extend(own)
        files = meta.get("persisted_output_files")
        status = meta.get("status", "success")
        error = meta.get("error")
        if status != "success" and not error:
            error = f"recorded with status {status}"
        responses.append(
            ToolCallResponse(
                call_id=str(meta.get("call_id", "")),
                name=str(meta.get("name", "")),
                parts=own,
                display=None,
                error=error,
                error_type=meta.get("error_type"),
                status=status,
                persisted_output_files=None if files is None else tuple(Path(p) for p in files),
            )
        )
        kinds.append(meta.get("kind", "executed"))
    restored.extend(parts[offset:])
    stop_reason = record.get("stop_reason")
    return RecordedTurn(
        type="tool_turn",
        parts=restored,
        responses=responses,
        kinds=kinds,
        seq=int(record.get("seq", 0)),
        stop_reason=stop_reason if isinstance(stop_reason, str) else None,
    )


_RECORD_START: Final = b'{"type":'


def _parse_record(raw: bytes) -> tuple[dict[str, Any], list[Part]]:
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record, parts_adapter.validate_python(record.get("parts", []))


def load_session(path: str | os.PathLike[str]) -> list[RecordedTurn]:
    """Read a transcript back, in order.

    Every completely recorded entry is returned; the parts of each compare equal (byte for
    byte after JSON serialization) to what was sent. A torn last line is skipped with a
    warning; a damaged line elsewhere is skipped with a warning too, and nothing around it
    is lost (a complete record glued to a torn fragment by an older version is kept).

    Raises:
        RecorderError: the file cannot be read.
    """
    source = Path(path)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise RecorderError(f"cannot read transcript {str(source)!r}: {exc}", path=source) from exc
    lines = data.split(b"\n")
    entries: list[RecordedTurn] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        is_last = number == len(lines)
        try:
            record, parts = _parse_record(raw)
        except (ValueError, ValidationError) as exc:
            # A record glued to a torn fragment (written before appends were undone on
            # failure) still starts with its own '{"type":', which ASCII JSON cannot hold
            # inside a string: keep the complete record after the fragment.
            start = raw.rfind(_RECORD_START)
            try:
                if start <= 0:
                    raise
                record, parts = _parse_record(raw[start:])
                log.warning("recorder.fragment_skipped", path=str(source), line=number)
            except (ValueError, ValidationError):
                event = "recorder.torn_last_line" if is_last else "recorder.bad_line"
                log.warning(event, path=str(source), line=number, error=str(exc)[:200])
                continue
        kind = record.get("type", "tool_turn")
        if kind == "tool_turn":
            entries.append(_rebuild_tool_turn(record, parts))
        elif kind == "message":
            calls = [
                ToolCall.model_validate(
                    {"id": c.get("id", ""), "name": c.get("name", ""), "args": c.get("args", {})}
                )
                for c in record.get("tool_calls", [])
            ]
            role = record.get("role", "user")
            entries.append(
                RecordedTurn(
                    type="message",
                    parts=parts,
                    role="model" if role == "model" else "user",
                    tool_calls=calls,
                    seq=int(record.get("seq", 0)),
                )
            )
        else:
            log.debug("recorder.unknown_record", path=str(source), line=number, type=kind)
    return entries
