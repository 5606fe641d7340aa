"""The one media module: a part is media only when its bytes, read whole, are what they claim."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, strategies as st

from tests.providers._samples import gif, jpeg_header, png, wav, webp_header
from toolbatch._core import (
    base64_decoded_size,
    describe_bytes,
    file_uri_problem,
    jpeg_dimensions,
    media_type_problem,
    verify_media,
)

TEXT = b"just some text, not media. " * 20_000


MP3 = (b"\xff\xfb\x90\x64" + b"\0" * 413) * 50
"""50 MPEG-1 layer III frames (128 kbit/s, 44.1 kHz) of silence."""


def _jpeg(width: int = 8, height: int = 8, *, exif_bytes: int = 0) -> bytes:
    """A JPEG's structure: headers, a scan (with a stuffed 0xFF and a restart marker), EOI."""
    sos = b"\xff\xda" + struct.pack(">H", 12) + b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00"
    header = jpeg_header(width, height, exif_bytes=exif_bytes)[:-2]
    return header + sos + b"\x12\xff\x00\x34\xff\xd0\x56" + b"\xff\xd9"


@given(
    width=st.integers(1, 65_535),
    height=st.integers(1, 65_535),
    exif_bytes=st.integers(0, 140_000),
    cut=st.integers(0, 40),
)
def test_one_jpeg_walker_checks_a_file_and_reads_its_size(
    width: int, height: int, exif_bytes: int, cut: int
) -> None:
    """The structural check and the size reader walk JPEG segments the same way: a whole
    file verifies and gives its size from any prefix holding its frame header's dimensions;
    a file cut short anywhere is no JPEG, and a head cut before the dimensions has no size."""
    whole = _jpeg(width, height, exif_bytes=exif_bytes)
    assert verify_media(whole) is not None
    assert jpeg_dimensions(whole) == (width, height)
    frame = len(jpeg_header(width, height, exif_bytes=exif_bytes)) - 2 - 19  # SOF0's FF
    assert jpeg_dimensions(whole[: frame + 9]) == (width, height)
    assert jpeg_dimensions(whole[: max(frame + 8 - cut, 0)]) is None
    assert verify_media(whole[: len(whole) - 1 - cut]) is None


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        pytest.param(png(), "image/png", id="png"),
        pytest.param(gif(), "image/gif", id="gif"),
        pytest.param(gif()[:-1], "image/gif", id="gif-without-its-trailer"),
        pytest.param(_jpeg(), "image/jpeg", id="jpeg"),
        pytest.param(webp_header(4, 4), "image/webp", id="webp"),
        pytest.param(wav(), "audio/wav", id="wav"),
        pytest.param(MP3, "audio/mpeg", id="mp3"),
        pytest.param(png() + b"\0" * 100, "image/png", id="png-with-a-little-padding"),
    ],
)
def test_real_media_is_recognised(data: bytes, mime: str) -> None:
    found = verify_media(data)
    assert found is not None
    assert found.mime_type == mime


def _bad_crc_png() -> bytes:
    data = bytearray(png())
    data[-20] ^= 0xFF  # inside IDAT: its CRC no longer matches
    return bytes(data)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x89PNG\r\n\x1a\n" + TEXT, id="png-signature-then-text"),
        pytest.param(png() + TEXT, id="real-png-then-text"),
        pytest.param(_bad_crc_png(), id="png-with-a-bad-crc"),
        pytest.param(b"BM" + TEXT, id="text-starting-BM"),
        pytest.param(b"ID3" + TEXT, id="text-starting-ID3"),
        pytest.param(b"ID3\x03\x00\x00\x00\x00\x00\x00" + TEXT, id="empty-id3-tag-then-text"),
        pytest.param(b"OggS" + TEXT, id="text-starting-OggS"),
        pytest.param(b"fLaC" + TEXT, id="text-starting-fLaC"),
        pytest.param(b"\xff\xd8\xff\xe0" + TEXT, id="jpeg-signature-then-text"),
        pytest.param(b"GIF89a" + TEXT, id="gif-signature-then-text"),
        pytest.param(b"RIFF\x10\x00\x00\x00WAVEfmt " + TEXT, id="riff-wave-then-text"),
        pytest.param(wav() + TEXT, id="real-wav-then-text"),
        pytest.param(MP3 + TEXT, id="real-mp3-then-text"),
        pytest.param(jpeg_header(8, 8), id="jpeg-without-a-scan"),
        pytest.param(b"", id="nothing"),
    ],
)
def test_a_signature_alone_is_not_media(data: bytes) -> None:
    assert verify_media(data) is None


@pytest.mark.parametrize(
    ("mime", "fine"),
    [
        ("image/png", True),
        ("audio/mpeg", True),
        ("image/svg+xml", True),
        ('text/plain; charset="utf-8"', True),
        ("image/png" + "x" * 2_000_000, False),
        ("image", False),
        ("image/png\nX-Injected: 1", False),
        ("", False),
    ],
)
def test_a_mime_type_must_be_well_formed_and_short(mime: str, fine: bool) -> None:
    problem = media_type_problem(mime)
    assert (problem is None) == fine
    if problem is not None:
        assert len(problem) < 300  # names the value, bounded


def test_a_file_uri_must_be_short() -> None:
    assert file_uri_problem("gs://bucket/a.png") is None
    problem = file_uri_problem("gs://bucket/" + "u" * 2_000_000)
    assert problem is not None
    assert "2,000,012 characters" in problem
    assert file_uri_problem("gs://a b") is not None


def test_sizes_are_counted_and_told_once() -> None:
    assert base64_decoded_size("AAAA") == 3
    assert base64_decoded_size("AA==") == 1
    assert base64_decoded_size("AA\nAA") == 3
    assert describe_bytes(512) == "512 bytes"
    assert describe_bytes(4096) == "4.0 KiB"
    assert describe_bytes(30 * 2**20) == "30.0 MiB"
    assert describe_bytes(3 * 2**30) == "3.0 GiB"


def test_a_png_chunk_walk_needs_ihdr_first() -> None:
    chunk = b"tEXt" + b"hello"
    bogus = struct.pack(">I", 5) + chunk + struct.pack(">I", zlib.crc32(chunk))
    assert verify_media(b"\x89PNG\r\n\x1a\n" + bogus + png()[8:]) is None
