"""Newline framing over raw descriptors, shared by ``toolbatch serve`` and ``toolbatch acp``."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from toolbatch._descriptor_io import DescriptorIO, LineSplitter, Oversized


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
