"""Newline-framed messages over raw file descriptors, whatever the descriptor is.

The stdio runtimes (``toolbatch serve`` and ``toolbatch acp``) read and write their
messages here. A descriptor may be a pipe, a socket or a terminal (the event loop waits for
readiness), or a regular file or ``/dev/null`` (which the event loop cannot watch, and
which never block: they are read and written directly). So ``toolbatch acp < requests.jsonl
> replies.jsonl`` works like a pipe does. The descriptors' blocking mode is left alone:
they may be shared with the parent's terminal.
"""

from __future__ import annotations

import os
import select
import stat
from typing import Final

import anyio
import anyio.lowlevel

__all__ = ["OVERSIZED", "READ_CHUNK_BYTES", "DescriptorIO", "LineSplitter", "Oversized"]

READ_CHUNK_BYTES: Final = 1 * 2**20
"""The most one read takes (a regular file is read this much per event-loop turn)."""


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

    async def write(self, data: bytes) -> None:
        """Write all of ``data``."""
        view = memoryview(data)
        while view:
            view = view[await self.write_some(view) :]
