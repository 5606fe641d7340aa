"""Newline framing over raw descriptors, shared by ``toolbatch serve`` and ``toolbatch acp``."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

import anyio
import anyio.lowlevel

from toolbatch._core._descriptor_io import DescriptorIO, LineSplitter, NonBlockingOutput, Oversized


def test_line_splitter_frames_on_newline_only() -> None:
    """Lines split on "\\n" only, across chunks; U+2028 and "\\r" stay inside a line."""
    splitter = LineSplitter(max_bytes=1_000)
    sep = "\u2028".encode()
    lines = splitter.feed(b'{"a":"x' + sep + b'y"}\n{"b"')
    lines += splitter.feed(b":1}\r\n")
    lines += splitter.feed(b'{"c":2}')
    lines += splitter.finish()
    assert lines == [b'{"a":"x' + sep + b'y"}', b'{"b":1}\r', b'{"c":2}']


def test_line_splitter_drops_oversized_lines_and_goes_on() -> None:
    """A line over the limit becomes one marker; the next line is intact."""
    splitter = LineSplitter(max_bytes=10)
    lines = splitter.feed(b"0123456789abc")
    lines += splitter.feed(b"def\nshort\n")
    assert isinstance(lines[0], Oversized)
    assert lines[1:] == [b"short"]


async def test_regular_files_and_dev_null_are_read_and_written_directly(tmp_path: Path) -> None:
    """A regular file and /dev/null, which epoll refuses, still read and write."""
    path = tmp_path / "data"
    path.write_bytes(b"x" * 10)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        regular = DescriptorIO(fd)
        assert regular.regular_file
        assert await regular.read() == b"x" * 10
        assert await regular.read() == b""
        await regular.write(b"y" * 3)
        device = DescriptorIO(null)
        assert not device.regular_file
        with anyio.fail_after(5):
            assert await device.read() == b""
            await device.write(b"z" * 100_000)
    finally:
        os.close(fd)
        os.close(null)
    assert path.read_bytes() == b"x" * 10 + b"y" * 3


async def test_nonblocking_output_fills_a_pipe_in_one_wake_up_and_leaves_its_mode_alone() -> None:
    """A pipe is written until it is full in one loop turn, through a description of its own:
    the descriptor stays open and blocking, a write to a full pipe waits (cancellably), and
    the reader sees the end once the caller closes the descriptor."""
    read_end, write_end = os.pipe()
    output = NonBlockingOutput(write_end)
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await anyio.lowlevel.checkpoint()

    try:
        assert output.nonblocking
        size = fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ)  # grown where the system allows
        data = bytes(range(256)) * (size // 256)
        async with anyio.create_task_group() as tg:
            tg.start_soon(count_turns)
            await anyio.lowlevel.checkpoint()
            counted = turns
            with anyio.fail_after(5):
                await output.write(data)  # nobody reads: it all fits, in one write
            assert turns - counted <= 2  # not one turn per PIPE_BUF
            with anyio.move_on_after(0.2) as stalled:
                await output.write(b"y" * 4096)  # the pipe is full: it waits for room
            assert stalled.cancelled_caught
            tg.cancel_scope.cancel()
        assert os.get_blocking(write_end)
    finally:
        output.close()
    os.fstat(write_end)  # still open: only the private description was closed
    os.close(write_end)
    received = bytearray()
    while chunk := os.read(read_end, 1 << 20):
        received += chunk
    os.close(read_end)
    assert received == data


async def test_nonblocking_output_sends_to_a_socket_without_changing_its_mode() -> None:
    """A stream socket (what Node.js gives a child as stdout) is sent to with MSG_DONTWAIT:
    4 MiB arrive intact, and the socket keeps its blocking mode."""
    sender, receiver = socket.socketpair()
    data = os.urandom(4 << 20)
    received = bytearray()

    def drain() -> None:
        while chunk := receiver.recv(1 << 20):
            received.extend(chunk)

    try:
        output = NonBlockingOutput(sender.fileno())
        try:
            assert output.nonblocking
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, drain)
                with anyio.fail_after(10):
                    await output.write(data)
                assert sender.getblocking()
                sender.shutdown(socket.SHUT_WR)
        finally:
            output.close()
    finally:
        sender.close()
        receiver.close()
    assert received == data


async def test_nonblocking_output_writes_regular_files_directly(tmp_path: Path) -> None:
    """A regular file has no readiness to wait for: it is written as DescriptorIO does."""
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    output = NonBlockingOutput(fd)
    try:
        assert not output.nonblocking
        await output.write(bytearray(b"z" * 100_000))
    finally:
        output.close()
        os.close(fd)
    assert (tmp_path / "out").read_bytes() == b"z" * 100_000
