"""Output capture for commands: read a pipe into bounded memory and one artifact, then render it.

This is the half of the shell producer that knows nothing about processes: it turns the
bytes a command writes into what the model and the user are shown.

Memory
    Only the first bytes (enough to decide the trigger exactly, about 4 bytes per trigger
    character) and a rolling tail are kept in memory. Once the output passes the trigger,
    all of it, from the first byte, streams into one artifact through the store's streaming
    writer, which writes behind (its threads write one buffer while the pipe is read into
    the next), so disk writes overlap pipe reads without a task or a queue of our own. A
    1 GiB output costs the same memory as a 1 MiB one.

Rendering
    At or under the trigger: the whole output. Over it: a preview of at most
    ``preview_chars`` in the one preview format (``toolbatch._core._preview``: a header with the
    artifact path, a fifth head, the rest tail, so the end stays visible), and for the
    user a head-and-tail window of about ``display_window``
    bytes. Output with a NUL among its first ``BINARY_SNIFF_BYTES`` is binary: its bytes go
    to a ``.bin`` artifact and only its size is shown. Invalid UTF-8 is shown as U+FFFD and
    counted.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import anyio
import anyio.abc
import anyio.lowlevel

from toolbatch._core import Excerpt, make_preview, unsaved_note
from toolbatch.artifacts import ArtifactStore, ArtifactStream, commit_within

__all__ = [
    "BINARY_SNIFF_BYTES",
    "MAX_UTF8_BYTES_PER_CHAR",
    "ArtifactSink",
    "Capture",
    "Kind",
    "ReadWindow",
    "Rendering",
    "Saved",
    "classify",
    "human_bytes",
    "pump",
    "render",
    "replace_escapes",
    "save",
]

READ_CHUNK_BYTES: Final = 1 * 2**20
YIELD_EVERY_BYTES: Final = 4 * 2**20
"""Bytes read without an await before the reader yields to the event loop anyway."""
BINARY_SNIFF_BYTES: Final = 8_000
"""A NUL byte among the first this-many bytes marks the output as binary (as git does)."""
SMALL_CHUNK_BYTES: Final = 4096
PROGRESS_INTERVAL_S: Final = 1.0
MAX_UTF8_BYTES_PER_CHAR: Final = 4

_ESCAPED_BYTE: Final = re.compile("[\udc80-\udcff]")
_REPLACEMENT: Final = "\ufffd"

Kind: TypeAlias = Literal["whole", "preview", "binary"]


# -- decoding ---------------------------------------------------------------------------


def replace_escapes(text: str) -> tuple[str, int]:
    """``text`` with each surrogate-escaped invalid byte made U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return _ESCAPED_BYTE.subn(_REPLACEMENT, text)


def _decode_prefix(data: bytes, max_chars: int) -> tuple[str, int]:
    """At most ``max_chars`` from the start of ``data`` (a prefix of the output).

    Returns the text (invalid bytes still surrogate-escaped) and how many bytes it covers.
    A character cut by the end of ``data`` is left out; a line boundary in the last quarter
    is preferred as the cut.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    text = decoder.decode(data[: max_chars * MAX_UTF8_BYTES_PER_CHAR], final=False)[:max_chars]
    newline = text.rfind("\n")
    if newline >= 0 and newline >= len(text) * 3 // 4:
        text = text[: newline + 1]
    return text, len(text.encode("utf-8", "surrogateescape"))


def _decode_suffix(data: bytes, max_chars: int, *, cut: bool) -> tuple[str, int]:
    """At most ``max_chars`` from the end of ``data`` (a suffix of the output).

    ``cut`` says that ``data`` does not start at the output's first byte, so a character
    split by its start is skipped. A line boundary in the first quarter is preferred.
    """
    window = max_chars * MAX_UTF8_BYTES_PER_CHAR
    raw = data[-window:] if window < len(data) else data
    skip = 0
    if cut or len(raw) < len(data):
        while skip < min(3, len(raw)) and 0x80 <= raw[skip] <= 0xBF:
            skip += 1
    text = raw[skip:].decode("utf-8", "surrogateescape")[-max_chars:]
    newline = text.find("\n")
    if 0 <= newline < len(text) // 4:
        text = text[newline + 1 :]
    return text, len(text.encode("utf-8", "surrogateescape"))


def _head_and_tail(
    head: bytes, tail: bytes, total: int, *, head_chars: int, tail_chars: int
) -> tuple[str, int]:
    """A head, an omission marker and a tail of an output of ``total`` bytes.

    ``head`` is a prefix of the output and ``tail`` a suffix (they may be the same complete
    output). Returns the text and the number of invalid bytes shown as U+FFFD.
    """
    head_text, head_bytes = _decode_prefix(head, head_chars)
    tail_text, tail_bytes = _decode_suffix(tail, tail_chars, cut=len(tail) < total)
    omitted = total - head_bytes - tail_bytes
    if omitted <= 0 and len(head) == total:
        return replace_escapes(head.decode("utf-8", "surrogateescape"))
    newline = "" if not head_text or head_text.endswith("\n") else "\n"
    marker = f"{newline}... [{max(omitted, 0):,} bytes omitted] ...\n"
    return replace_escapes(head_text + marker + tail_text)


def human_bytes(count: int) -> str:
    """``count`` bytes for people: ``512 B``, ``1.5 KiB``, ``3.0 MiB``, ``1.25 GiB``."""
    if count < 2**10:
        return f"{count} B"
    if count < 2**20:
        return f"{count / 2**10:.1f} KiB"
    if count < 2**30:
        return f"{count / 2**20:.1f} MiB"
    return f"{count / 2**30:.2f} GiB"


# -- the bounded in-memory view ---------------------------------------------------------


@dataclass(slots=True, eq=False)
class Capture:
    """The bounded in-memory view of a command's output: first bytes, rolling tail, count.

    The tail keeps references to the last chunks read (no copying on the hot path; small
    reads are merged); it holds at most ``tail_cap`` bytes plus one chunk.
    """

    head_cap: int
    tail_cap: int
    artifact_after_bytes: int
    """Past this many bytes the output might be over the trigger: stream it to an artifact."""
    head: bytearray = field(default_factory=bytearray)
    total: int = 0
    binary: bool = False
    _tail: deque[bytes] = field(default_factory=deque)
    _tail_bytes: int = 0

    def feed(self, chunk: bytes) -> None:
        total = self.total
        if total < BINARY_SNIFF_BYTES and chunk.find(b"\0", 0, BINARY_SNIFF_BYTES - total) >= 0:
            self.binary = True
        if total < self.head_cap:
            self.head += chunk[: self.head_cap - total]
        tail = self._tail
        if len(chunk) < SMALL_CHUNK_BYTES and tail and len(tail[-1]) < SMALL_CHUNK_BYTES:
            tail[-1] += chunk  # a trickle of tiny reads must not become a long deque
        else:
            tail.append(chunk)
        self._tail_bytes += len(chunk)
        while self._tail_bytes - len(tail[0]) >= self.tail_cap:
            self._tail_bytes -= len(tail.popleft())
        self.total = total + len(chunk)

    def tail(self) -> bytes:
        """The last ``tail_cap`` bytes (fewer if the output is shorter)."""
        return b"".join(self._tail)[-self.tail_cap :]

    def wants_artifact(self, *, eof: bool) -> bool:
        """Whether the output must go to an artifact (its suffix is known once sniffed)."""
        if self.binary:
            return True
        sniffed = eof or self.total >= BINARY_SNIFF_BYTES
        return sniffed and self.total > self.artifact_after_bytes

    @property
    def suffix(self) -> str:
        return ".bin" if self.binary else ".txt"

    def whole(self) -> bytes | None:
        """The complete output, if it all fitted in the head."""
        return bytes(self.head) if self.total <= self.head_cap else None

    def mentions(self, needles: tuple[bytes, ...]) -> bool:
        """Whether the kept head or tail contains one of ``needles`` (ASCII, any case)."""
        kept = (bytes(self.head).lower(), self.tail().lower())
        return any(needle.lower() in part for needle in needles for part in kept)


# -- the artifact side ------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ArtifactSink:
    """Opens the artifact stream on demand and writes to it (the stream writes behind, so
    the pipe is read on while the store's threads write)."""

    store: ArtifactStore | None
    call_id: str
    tool_name: str
    stack: contextlib.AsyncExitStack
    stream: ArtifactStream | None = None

    async def open(self, suffix: str, first: bytes) -> None:
        assert self.store is not None
        self.stream = await self.stack.enter_async_context(
            self.store.open_stream(self.call_id, self.tool_name, suffix=suffix)
        )
        if first:
            await self.write(first)

    async def write(self, chunk: bytes) -> bool:
        """Write ``chunk``; ``False`` (and no await) once the stream keeps nothing more."""
        stream = self.stream
        if stream is None:
            return False
        if stream.error is not None or stream.dropped_by is not None:
            return False  # a cap or a write error: the rest is only counted
        await stream.write(chunk)
        if stream.dropped_by is not None:
            # The store keeps nothing more (a cap): the disk takes what was kept while
            # the pipe drains, so the commit's fsync has little left to wait for.
            await stream.sync_early()
        return True


@dataclass(slots=True)
class Saved:
    """Where the complete output went, if anywhere."""

    path: Path | None = None
    kept_bytes: int = 0
    cap: Literal["file", "total"] | None = None
    problem: str | None = None
    """Why there is no file: no store, or the write failed."""


# -- reading the pipe -------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class ReadWindow:
    """Lets whoever watches the process end the reader's waits on the pipe (a bounded drain)."""

    deadline: float = math.inf
    _scope: anyio.CancelScope | None = None

    def close_at(self, deadline: float) -> None:
        self.deadline = min(self.deadline, deadline)
        if self._scope is not None:
            self._scope.deadline = self.deadline

    async def wait_readable(self, fd: int) -> bool:
        """Wait for data or EOF on ``fd``; ``False`` when the window closed first."""
        with anyio.CancelScope(deadline=self.deadline) as scope:
            self._scope = scope
            try:
                await anyio.wait_readable(fd)
            finally:
                self._scope = None
        return not scope.cancelled_caught


async def pump(
    fd: int,
    capture: Capture,
    sink: ArtifactSink,
    window: ReadWindow,
    *,
    progress: Callable[[int], None],
    log: Any,
    output: Callable[[bytes], None] | None = None,
    last: bool = True,
) -> bool:
    """Read the non-blocking pipe ``fd`` to EOF (or until ``window`` closes); whether
    nothing is left to read (EOF, or a read error). ``last=False``: another call reads on
    after a closed window (what is read so far is not yet all there is).

    Every chunk goes into ``capture``; once the output wants an artifact, all of it (from
    its first byte) also goes to ``sink``. ``progress`` gets the byte count about once a
    second; ``output``, when given, every chunk of text output as it is read (not those
    of an output found to be binary).
    """
    storing = sink.store is not None
    read = os.read
    current_time = anyio.current_time
    unyielded = 0
    next_progress = current_time() + PROGRESS_INTERVAL_S
    ended = False
    while True:
        try:
            chunk = read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            if not await window.wait_readable(fd):
                break
            unyielded = 0
            continue
        except OSError as exc:
            log.warning("shell.read_failed", error=str(exc))
            ended = True
            break
        if not chunk:
            ended = True
            break
        before = capture.total
        capture.feed(chunk)
        if output is not None and not capture.binary:
            output(chunk)
        if sink.stream is not None:
            if await sink.write(chunk):
                unyielded = 0
        elif storing and capture.wants_artifact(eof=False):
            # Everything before this chunk is still in the head (it opens by then).
            await sink.open(capture.suffix, bytes(capture.head[:before]) + chunk)
            unyielded = 0
        unyielded += len(chunk)
        if unyielded >= YIELD_EVERY_BYTES:
            await anyio.lowlevel.checkpoint()
            unyielded = 0
        now = current_time()
        if now >= next_progress:
            next_progress = now + PROGRESS_INTERVAL_S
            progress(capture.total)
        if now >= window.deadline:
            break  # something keeps writing after the drain ended
    if (ended or last) and sink.stream is None and storing and capture.wants_artifact(eof=True):
        await sink.open(capture.suffix, bytes(capture.head))
    return ended


# -- deciding and rendering -------------------------------------------------------------


def classify(capture: Capture, trigger: int) -> Kind:
    """Whether the output is shown whole, previewed, or described as binary.

    ``trigger`` is in characters; -1 disables it (``capture`` then previews only past what
    its head can hold).
    """
    if capture.binary:
        return "binary"
    whole = capture.whole()
    if whole is None:
        return "preview"
    if trigger < 0 or len(whole) <= trigger:
        return "whole"
    # Between the trigger in bytes and in characters only decoding can tell.
    chars = len(whole.decode("utf-8", "surrogateescape"))
    return "preview" if chars > trigger else "whole"


async def save(kind: Kind, sink: ArtifactSink, store: ArtifactStore | None) -> Saved:
    """Commit the artifact a preview or a binary output needs; whole output needs none."""
    if kind == "whole":
        return Saved()  # leaving the stack discards a stream opened just in case
    stream = sink.stream
    if store is None:
        return Saved(problem="no artifact store is configured")
    if stream is None:
        return Saved(problem="the output stream was not opened")
    # Bounded by the caller's scopes (the shell's stop budget after an abort): past that
    # the preview says the output was not saved, instead of the output being lost.
    path = await commit_within(stream)
    if not isinstance(path, Path):
        return Saved(problem=f"saving it failed: {path}")
    return Saved(path=path, kept_bytes=stream.bytes_kept, cap=stream.dropped_by)


@dataclass(frozen=True, slots=True)
class Rendering:
    """What the model and the user are shown of the output, before the caller's notes.

    Attributes:
        content: the model's text (the whole output, a preview with its header, or the
            binary description).
        display: the user's text.
        notes: lines that follow the body in both (invalid bytes replaced).
        display_lead: a line that follows the display's body before ``notes`` (where the
            complete output went), if any.
        persisted_output_files: ``None`` for whole output (nothing to persist), else the
            artifact or ``()`` when none could be written.
        excerpt: for a preview, the output's head and tail it was cut from, so the caller
            can fit it again with its notes and exit line as the trailer.
    """

    content: str
    display: str
    notes: tuple[str, ...] = ()
    display_lead: str | None = None
    persisted_output_files: tuple[Path, ...] | None = None
    excerpt: Excerpt | None = None


def render(
    kind: Kind, capture: Capture, saved: Saved, *, preview_chars: int, display_window: int
) -> Rendering:
    """The model's and the user's view of a captured output of ``kind``."""
    total = capture.total
    if kind == "whole":
        whole = capture.whole()
        assert whole is not None
        text, replaced = replace_escapes(whole.decode("utf-8", "surrogateescape"))
        body = text if text else "(no output)"
        note = f"[{replaced:,} invalid UTF-8 bytes were replaced with U+FFFD]"
        return Rendering(content=body, display=body, notes=(note,) if replaced else ())
    persisted = (saved.path,) if saved.path is not None else ()
    unsaved = total - saved.kept_bytes if saved.path is not None else 0
    if kind == "binary":
        body = f"[binary output: {total:,} bytes, not shown; {_where(saved, unsaved)}]"
        return Rendering(content=body, display=body, persisted_output_files=persisted)
    whole = capture.whole()
    if whole is not None:
        text, replaced = replace_escapes(whole.decode("utf-8", "surrogateescape"))
        if len(text) <= preview_chars:
            # Over the trigger but within the preview: shown whole, and in the file too.
            note = f"[{replaced:,} invalid UTF-8 bytes were replaced with U+FFFD]"
            return Rendering(
                content=text,
                display=text,
                notes=(note,) if replaced else (),
                persisted_output_files=persisted,
            )
    head = whole if whole is not None else bytes(capture.head)
    tail = whole if whole is not None else capture.tail()
    head_text, _ = _decode_prefix(head, preview_chars)
    tail_text, _ = _decode_suffix(tail, preview_chars, cut=len(tail) < total)
    head_text, head_replaced = replace_escapes(head_text)
    tail_text, tail_replaced = replace_escapes(tail_text)
    notes = _preview_notes(saved, unsaved, total)
    excerpt = Excerpt(head_text, tail_text, total, "bytes", notes=notes)
    shown = make_preview(excerpt, preview_chars, paths=[str(path) for path in persisted])
    replaced = head_replaced + tail_replaced
    window_head = display_window // 4
    window, _ = _head_and_tail(
        head[:window_head],
        tail[-(display_window - window_head) :],
        total,
        head_chars=window_head,
        tail_chars=display_window - window_head,
    )
    replacements = (
        [f"[{replaced:,} invalid UTF-8 bytes were replaced with U+FFFD]"] if replaced else []
    )
    return Rendering(
        content=shown.text,
        display=window,
        notes=tuple(replacements),
        display_lead=f"Output too long ({total:,} bytes); {_where(saved, unsaved)}",
        persisted_output_files=persisted,
        excerpt=excerpt,
    )


def _preview_notes(saved: Saved, unsaved: int, total: int) -> tuple[str, ...]:
    """The preview's header lines after the path: what is in no file, how to read it."""
    if saved.path is None:
        return (
            f"The output is {total:,} bytes.",
            unsaved_note(saved.problem or "no artifact store is configured"),
        )
    notes = []
    if unsaved > 0:
        which = "per-file" if saved.cap == "file" else "total"
        notes.append(
            f"Only its first {saved.kept_bytes:,} bytes are in that file ({unsaved:,} bytes "
            f"were not saved: the artifact store's {which} cap)."
        )
    notes.append(
        f"The output is {total:,} bytes; read the file with shell commands (grep, sed -n, "
        f"tail) for what is not shown."
    )
    return tuple(notes)


def _where(saved: Saved, unsaved: int) -> str:
    if saved.path is None:
        return f"it was not saved to a file ({saved.problem})"
    if unsaved > 0:
        which = "per-file" if saved.cap == "file" else "total"
        return (
            f"its first {saved.kept_bytes:,} bytes were saved to: {saved.path} "
            f"({unsaved:,} bytes were not saved: the artifact store's {which} cap)"
        )
    return f"the full output was saved to: {saved.path}"
