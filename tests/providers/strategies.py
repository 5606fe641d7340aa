"""Hypothesis strategies for turns with media, and for model replies with calls.

Media are drawn from a few prepared payloads around each API's limits (a tiny PNG, 1 MB,
just under and just over 5 MiB of base64, over 20 MiB, images taller than 8000 px or wider
than 2000 px, bytes that are no image at all) under many media types, some saved and some
not. Payload strings are built once and shared, so large examples stay cheap.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from pydantic import JsonValue

from tests.providers._samples import b64, jpeg_header, png, png_header, webp_header
from tests.strategies import function_response_parts, text_parts, texts
from toolbatch import FileData, FileDataPart, InlineData, InlineDataPart, Part

__all__ = [
    "MEDIA_TYPES",
    "Payload",
    "arguments",
    "payloads",
    "turns",
]

MEDIA_TYPES = (
    "image/png",
    "image/jpeg",
    "image/jpg",
    "image/gif",
    "image/webp",
    "image/heic",
    "image/svg+xml",
    "IMAGE/PNG",
    "audio/wav",
    "audio/mpeg",
    "video/mp4",
    "application/pdf",
    "application/octet-stream",
)
_IDS = ("call_1", "call_2", "call_3", "toolu_01", "")
_NAMES = ("run_shell_command", "mcp__browser__screenshot", "read_file")


@dataclass(frozen=True)
class Payload:
    """Base64 data and, when it is an image header we wrote, its pixel size."""

    name: str
    data: str
    size_px: tuple[int, int] | None


def _padded(head: bytes, base64_chars: int) -> str:
    return b64(head + b"\0" * max(0, base64_chars * 3 // 4 - len(head)))


@functools.cache
def payloads() -> tuple[Payload, ...]:
    """The prepared payloads (built on first use)."""
    return (
        Payload("tiny png", b64(png(2, 2)), (2, 2)),
        Payload("garbage", "bm90IGFuIGltYWdl", None),
        Payload("1 MB png", _padded(png_header(1000, 800), 1_400_000), (1000, 800)),
        Payload(
            "5 MiB - 4 png", _padded(png_header(1500, 1500), 5 * 1024 * 1024 - 4), (1500, 1500)
        ),
        Payload(
            "5 MiB + 4 png", _padded(png_header(1500, 1500), 5 * 1024 * 1024 + 4), (1500, 1500)
        ),
        Payload("21 MB png", _padded(png_header(3000, 3000), 21_000_000), (3000, 3000)),
        Payload("tall png", b64(png_header(1280, 9000)), (1280, 9000)),
        Payload("wide jpeg", b64(jpeg_header(2400, 1600, exif_bytes=70_000)), (2400, 1600)),
        Payload("webp", b64(webp_header(640, 480)), (640, 480)),
    )


_PAYLOAD_BY_DATA: dict[str, Payload] = {}


def payload_of(data: str) -> Payload:
    """The payload a part's data was drawn from."""
    if not _PAYLOAD_BY_DATA:
        _PAYLOAD_BY_DATA.update({p.data: p for p in payloads()})
    return _PAYLOAD_BY_DATA[data]


def _inline(mime: str, payload: Payload, saved: bool) -> InlineDataPart:
    path = Path(f"/artifacts/{payload.name.replace(' ', '-')}") if saved else None
    return InlineDataPart(
        inline_data=InlineData(mime_type=mime, data=payload.data, persisted_file=path)
    )


@functools.cache
def media() -> st.SearchStrategy[Part]:
    """Inline media of any listed type and payload, saved or not, or a file reference."""
    inline = st.builds(
        _inline,
        st.sampled_from(MEDIA_TYPES),
        st.sampled_from(payloads()),
        st.booleans(),
    )
    file = st.builds(
        lambda mime, name: FileDataPart(
            file_data=FileData(mime_type=mime, file_uri=f"gs://bucket/{name}")
        ),
        st.sampled_from(MEDIA_TYPES),
        st.text(alphabet="abc", min_size=1, max_size=4),
    )
    return st.one_of(inline, inline, inline, file)


@functools.cache
def _turn_pieces(max_calls: int) -> tuple[st.SearchStrategy[Any], ...]:
    # Built once, not per draw: hypothesis validates each new strategy object.
    short = texts(max_repeat=4, max_units=4)
    responses = {
        (call_id, name): function_response_parts(call_id, name, text=short)
        for call_id in _IDS
        for name in _NAMES
    }
    return (
        st.lists(media(), max_size=1),
        st.integers(0, max_calls),
        st.sampled_from(sorted(responses.items())).flatmap(lambda item: item[1]),
        st.lists(media(), max_size=3),
        st.lists(text_parts(short), max_size=2),
    )


@st.composite
def turns(draw: st.DrawFn, *, max_calls: int = 6) -> list[Part]:
    """A tool message's parts: stray media, calls each with media, then batch text."""
    stray, calls, response, call_media, text = _turn_pieces(max_calls)
    parts: list[Part] = draw(stray)
    for _ in range(draw(calls)):
        parts.append(draw(response))
        parts += draw(call_media)
    parts += draw(text)
    return parts


_json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def arguments() -> st.SearchStrategy[str]:
    """Argument strings: JSON objects, other JSON values, and text that is not JSON."""
    objects = st.dictionaries(st.text(max_size=6), _json_values, max_size=4).map(json.dumps)
    others = _json_values.map(json.dumps)
    broken = st.text(max_size=20)
    return st.one_of(objects, objects, others, broken)
