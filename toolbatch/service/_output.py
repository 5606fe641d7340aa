"""The service's output: one writer task, fed by an outbox of whole lines and streams.

Backpressure and memory. Output is queued for one writer task, whole lines as UTF-8 bytes
packed into segments of up to ``WRITE_COALESCE_BYTES`` (1 MiB); each wake-up of the writer
writes as much as the client takes, not ``PIPE_BUF`` (``NonBlockingOutput``: a pipe is
written through a non-blocking description of its own, grown to 1 MiB, a socket with
``MSG_DONTWAIT``; stdout's own blocking mode is left alone), so progress does not pile up
while a large batch keeps the event loop busy. While more than
``OUTPUT_HIGH_WATER_BYTES`` (8 MiB) wait to be written (the client stopped reading its
stdout), the service reads no new request, so a client that stalls gets its own writes
blocked instead of the service buffering without limit. Meanwhile progress reports that
carry a ``message`` are dropped (a newer one follows); the ``queued``, ``running`` and
final status notifications never are, so memory is bounded by the batches already in
flight. A ``batch/run`` answer is not built whole: it is serialized ``STREAM_SLICE``
(1,000) responses at a time as the writer reaches it, and what was written is released; a
running batch keeps only its calls, not its parsed request. Output made as it is written
counts toward the mark from the moment it is queued, by an estimate of its size
(``QUEUED_LINE_BYTES`` per "queued" line; an answer ``ANSWER_BASE_BYTES`` plus
``ANSWER_RESPONSE_BYTES`` per response plus twice its text), so a client that sends 30,000
small requests and reads nothing stops being read once about 8 MiB of answers wait, instead
of the service holding 30,000 answers. Input limits: a line of at
most ``MAX_MESSAGE_BYTES`` (64 MiB) nested at most ``MAX_JSON_DEPTH`` (128) levels; either
excess is a ``-32600`` for that line only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol

import anyio
import structlog

from toolbatch._core import NonBlockingOutput

__all__ = [
    "OUTPUT_HIGH_WATER_BYTES",
    "WRITE_COALESCE_BYTES",
]

log = structlog.get_logger("toolbatch.service")

WRITE_COALESCE_BYTES: Final = 1 * 2**20
"""Queued output lines are packed into segments of up to this many bytes; the writer packs
what is queued (segments and streams) into writes of about this size."""
OUTPUT_HIGH_WATER_BYTES: Final = 8 * 2**20
"""Backpressure: while more than this is queued for stdout, no new request is read and
progress reports with a message are dropped (status changes never are)."""


class _Writer(Protocol):
    """What the writer tells the service: bytes written, and that the output is gone."""

    def written(self, size: int) -> None: ...

    def stop(self) -> None: ...


@dataclass(slots=True)
class _Stream:
    """Output made as it is written, and the bytes it counts toward the mark until then."""

    pieces: Iterator[str]
    size: int


class _Outbox:
    """The output waiting for the writer, in order: whole lines, packed as UTF-8 into
    segments of up to ``WRITE_COALESCE_BYTES``, and output made as it is written
    (``Iterator[str]``: the "queued" lines, a ``batch/run`` answer).

    A queued line costs its bytes, not a string object and a queue slot of its own: the
    running and finished notifications of a 100,000-call batch that wait behind a slow
    reader take 130 bytes each, not 190. The writer takes a whole segment at a time, so a
    segment is never added to once the writer has it, and it is released once written.
    """

    def __init__(self) -> None:
        self._items: deque[bytearray | _Stream] = deque()
        self._ready: anyio.Event | None = None
        self._closed = False

    def put_line(self, line: str) -> int:
        """Queue one whole line; the bytes it adds (``0`` once the outbox is closed)."""
        if self._closed:
            return 0
        data = line.encode("utf-8")
        items = self._items
        last = items[-1] if items else None
        if isinstance(last, bytearray) and len(last) + len(data) <= WRITE_COALESCE_BYTES:
            last += data
        else:
            items.append(bytearray(data))
            self._wake()
        return len(data)

    def put_stream(self, pieces: Iterator[str], size: int) -> int:
        """Queue output that is made as it is written (whole lines, in order), counted as
        ``size`` bytes; the bytes it adds (``0`` once the outbox is closed)."""
        if self._closed:
            return 0
        self._items.append(_Stream(pieces, size))
        self._wake()
        return size

    def _wake(self) -> None:
        if self._ready is not None:
            self._ready.set()
            self._ready = None

    def close(self) -> None:
        """No more output: ``get`` gives what is queued, then ``None``."""
        self._closed = True
        self._wake()

    def abandon(self) -> None:
        """The output is gone: drop what is queued and whatever comes."""
        self._closed = True
        self._items.clear()

    async def get(self) -> bytearray | _Stream | None:
        """The next segment or stream; ``None`` once closed and empty."""
        while not self._items:
            if self._closed:
                return None
            self._ready = anyio.Event()
            await self._ready.wait()
        return self._items.popleft()

    def get_nowait(self) -> bytearray | _Stream | None:
        """The next segment or stream if one is queued now, else ``None``."""
        return self._items.popleft() if self._items else None


async def _write_loop(outbox: _Outbox, output: NonBlockingOutput, service: _Writer) -> None:
    """Write what is queued, in order, until the outbox closes or the output fails.

    Whatever queued up while the last write waited goes out in the next one: segments and
    streams queued now are packed into writes of about ``WRITE_COALESCE_BYTES`` (a batch's
    "queued" lines, its status lines and its answer are one write, not three), and each
    ``output.write`` writes as much per wake-up as the reader takes. An item counts as
    written (``service.written``) once the write holding its last byte returns.
    """
    while True:
        item = await outbox.get()
        if item is None:
            return
        pending = _Pending(output.write, service)
        try:
            while item is not None:
                await pending.add(item)
                del item  # released as written, not held while the next one is awaited
                item = outbox.get_nowait() if pending.size < WRITE_COALESCE_BYTES else None
            await pending.flush()
        except OSError as exc:
            log.warning("service.output_closed", error=str(exc))
            outbox.abandon()
            service.stop()
            return
        finally:
            pending.release()


class _Pending:
    """Output taken from the outbox and not written yet, with the sizes it counts for."""

    def __init__(
        self, write: Callable[[bytes | bytearray], Awaitable[None]], service: _Writer
    ) -> None:
        self._write = write
        self._service = service
        self._buffer = bytearray()
        self._counted = 0
        """What the items whose last byte is in the buffer count toward the mark."""
        self._taking = 0
        """What the stream being made counts, while it is made."""

    @property
    def size(self) -> int:
        return len(self._buffer)

    async def add(self, item: bytearray | _Stream) -> None:
        if isinstance(item, bytearray):
            if not self._buffer and len(item) >= WRITE_COALESCE_BYTES:
                self._counted += len(item)
                self._buffer = item  # a full segment goes out as it is, not copied
            else:
                self._buffer += item
                self._counted += len(item)
        else:
            self._taking = item.size
            for piece in item.pieces:
                self._buffer += piece.encode("utf-8")
                if len(self._buffer) >= WRITE_COALESCE_BYTES:
                    await self.flush()
            self._counted += self._taking
            self._taking = 0
        if len(self._buffer) >= WRITE_COALESCE_BYTES:
            await self.flush()

    async def flush(self) -> None:
        """Write the buffer; the items it ended count as written, even if the write fails."""
        data, self._buffer = self._buffer, bytearray()
        try:
            if data:
                await self._write(data)
        finally:
            counted, self._counted = self._counted, 0
            if counted:
                self._service.written(counted)

    def release(self) -> None:
        """Count what was taken but not written as written (the output failed or the
        writer was cancelled): the mark must not hold reading back for ever."""
        counted = self._counted + self._taking
        self._counted = self._taking = 0
        self._buffer = bytearray()
        if counted:
            self._service.written(counted)
