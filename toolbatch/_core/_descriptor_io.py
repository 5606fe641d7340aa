"""Newline-framed messages over raw file descriptors, whatever the descriptor is.

The stdio runtimes (``toolbatch serve`` and ``toolbatch acp``) read and write their
messages here. A descriptor may be a pipe, a socket or a terminal (the event loop waits for
readiness), or a regular file or ``/dev/null`` (which the event loop cannot watch, and
which never block: they are read and written directly). So ``toolbatch acp < requests.jsonl
> replies.jsonl`` works like a pipe does. The descriptors' blocking mode is left alone:
they may be shared with the parent's terminal. ``NonBlockingOutput`` writes a pipe or a socket
as much as it takes per wake-up without changing that mode: it writes through a
non-blocking file description of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import stat
from typing import Final

import anyio
import anyio.lowlevel

__all__ = [
    "OVERSIZED",
    "READ_CHUNK_BYTES",
    "DescriptorIO",
    "LineSplitter",
    "NonBlockingOutput",
    "Oversized",
]

READ_CHUNK_BYTES: Final = 1 * 2**20
"""The most one read takes (a regular file is read this much per event-loop turn)."""
OUTPUT_PIPE_BYTES: Final = 1 * 2**20
"""``NonBlockingOutput`` grows a smaller output pipe to this (Linux's default
``pipe-max-size``): one event-loop turn can then write this much, however long the turn."""


class Oversized:
    """Stands for a line longer than the splitter's limit (its bytes were dropped)."""


OVERSIZED: Final = Oversized()


class LineSplitter:
    """Splits chunks into ``"\\n"``-framed lines in linear time; drops oversized lines."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._oversized = False

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        """The lines ``chunk`` completes (without their ``"\\n"``), in order."""
        *complete, rest = chunk.split(b"\n")
        lines: list[bytes | Oversized] = []
        for piece in complete:
            if self._oversized or self._pending_bytes + len(piece) > self._max:
                lines.append(OVERSIZED)
            else:
                lines.append(b"".join([*self._pending, piece]) if self._pending else piece)
            self._pending.clear()
            self._pending_bytes = 0
            self._oversized = False
        if not self._oversized:
            if self._pending_bytes + len(rest) > self._max:
                self._oversized = True
                self._pending.clear()
                self._pending_bytes = 0
            elif rest:
                self._pending.append(rest)
                self._pending_bytes += len(rest)
        return lines

    def finish(self) -> list[bytes | Oversized]:
        """The last line, when the input ended without a ``"\\n"``."""
        if self._oversized:
            return [OVERSIZED]
        return [b"".join(self._pending)] if self._pending else []


class DescriptorIO:
    """Reads and writes a file descriptor without blocking the event loop.

    Pipes, terminals and sockets wait for readiness first; regular files and devices the
    event loop cannot watch (``/dev/null``) never block, so they are used directly (with a
    checkpoint, so that reading a file to its end still lets other tasks run).
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.regular_file = stat.S_ISREG(os.fstat(fd).st_mode)
        """Whether ``fd`` is a regular file: its end is the end of a script, not of a peer."""
        self._pollable = not self.regular_file

    async def read(self) -> bytes:
        """Up to ``READ_CHUNK_BYTES``; ``b""`` at the end of the input."""
        if self._pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:  # epoll refuses /dev/null and the like: they never block
                self._pollable = False
        if not self._pollable:
            await anyio.lowlevel.checkpoint()
        return os.read(self.fd, READ_CHUNK_BYTES)

    async def write_some(self, data: bytes | bytearray | memoryview) -> int:
        """Write the start of ``data`` (at least one byte); how many bytes were written."""
        if self._pollable:
            try:
                await anyio.wait_writable(self.fd)
            except OSError:
                self._pollable = False
        if not self._pollable:
            await anyio.lowlevel.checkpoint()
        # After readiness a pipe takes PIPE_BUF bytes without blocking.
        size = select.PIPE_BUF if self._pollable else len(data)
        return os.write(self.fd, data[:size])

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data``."""
        view = memoryview(data)
        while view:
            view = view[await self.write_some(view) :]


class NonBlockingOutput:
    """Writes a descriptor as fast as its reader takes the data, without blocking the loop.

    ``DescriptorIO.write`` can only write ``PIPE_BUF`` bytes per wake-up to a blocking pipe
    (more might block the whole event loop). Here a pipe or FIFO is written through a
    private, non-blocking open file description of the same pipe (``/proc/self/fd/N``), and
    a stream socket with ``MSG_DONTWAIT``: each wake-up writes until the pipe or socket is
    full (``EAGAIN``), then waits for room. A pipe smaller than ``OUTPUT_PIPE_BYTES`` is
    grown to it where the system allows (Linux ``F_SETPIPE_SZ``): what one loop turn can
    write is what the pipe holds, and a loop busy with a large batch turns slowly. The
    descriptor's own file description, which may be shared with other processes (a
    parent's terminal), keeps its blocking mode. Anything else (a terminal, a regular
    file, ``/dev/null``, a system without ``/proc``) is written as ``DescriptorIO.write``
    writes it.

    ``close()`` releases the private description (so a reader sees the end of the stream
    once the caller closes ``fd``); ``fd`` itself is never closed.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._fallback = DescriptorIO(fd)
        self._private = -1
        self._socket: socket.socket | None = None
        if self._fallback.regular_file:
            return
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode):
            self._private = _reopen_nonblocking(fd)
            if self._private >= 0:
                _grow_pipe(self._private, OUTPUT_PIPE_BYTES)
        elif stat.S_ISSOCK(mode):
            self._socket = _stream_socket(fd)

    @property
    def nonblocking(self) -> bool:
        """Whether writes go through a non-blocking path (else ``PIPE_BUF`` per wake-up)."""
        return self._private >= 0 or self._socket is not None

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        """Write all of ``data``: as much per wake-up as the descriptor takes."""
        if not self.nonblocking:
            await self._fallback.write(data)
            return
        await anyio.lowlevel.checkpoint()  # cancellable and fair even when nothing blocks
        with memoryview(data) as whole:
            view = whole
            while view:
                try:
                    if self._socket is not None:
                        written = self._socket.send(view, socket.MSG_DONTWAIT)
                    else:
                        written = os.write(self._private, view)
                except BlockingIOError:
                    await anyio.wait_writable(self._waitable())
                    continue
                view = view[written:]

    def _waitable(self) -> int:
        return self._socket.fileno() if self._socket is not None else self._private

    def close(self) -> None:
        """Release the private description or socket (``fd`` stays open)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._private >= 0:
            os.close(self._private)
            self._private = -1


def _reopen_nonblocking(fd: int) -> int:
    """A new non-blocking write description of the pipe ``fd`` is, or ``-1``.

    Never a duplicate of ``fd``, even when it is non-blocking already: whoever shares its
    description could make it blocking again, and then a large write would block the loop.
    """
    try:
        private = os.open(
            f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
        )
    except OSError:  # no /proc, no reader left (ENXIO), no permission: write as before
        return -1
    mine, theirs = os.fstat(private), os.fstat(fd)
    if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
        os.close(private)
        return -1
    return private


def _grow_pipe(fd: int, size: int) -> None:
    """Grow the pipe ``fd`` to ``size`` bytes when it is smaller and the system lets it."""
    get_size = getattr(fcntl, "F_GETPIPE_SZ", None)
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if get_size is None or set_size is None:
        return
    with contextlib.suppress(OSError):  # over a user's pipe quota: keep the pipe's size
        if fcntl.fcntl(fd, get_size) < size:
            fcntl.fcntl(fd, set_size, size)


def _stream_socket(fd: int) -> socket.socket | None:
    """A socket object on a duplicate of the stream socket ``fd``, or ``None``.

    The duplicate shares ``fd``'s file description, so its blocking mode must not change:
    a socket object only leaves it alone when there is no default timeout.
    """
    if socket.getdefaulttimeout() is not None or not hasattr(socket, "MSG_DONTWAIT"):
        return None
    duplicate = os.dup(fd)
    try:
        sock = socket.socket(fileno=duplicate)
    except OSError:
        os.close(duplicate)
        return None
    if sock.type != socket.SOCK_STREAM:
        sock.close()
        return None
    return sock
