"""Real media files and the turns a model API must receive: built once, shared by the tests.

PNG, GIF and WAV files here are complete and valid; the JPEG and WebP files are their
headers (what the pixel-size reader looks at), which is all the mapping ever reads.
"""

from __future__ import annotations

import base64
import functools
import struct
import zlib
from pathlib import Path

from toolbatch import (
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
    Turn,
)

__all__ = [
    "SAVED",
    "b64",
    "big_png",
    "gif",
    "hook_turn",
    "inline",
    "jpeg_header",
    "media_turn",
    "png",
    "png_header",
    "sample_turns",
    "turn_of",
    "wav",
    "webp_header",
]

SAVED = Path("/artifacts/session")
"""Where the sample media were "saved" (``persisted_file``); nothing is written there."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int = 2, height: int = 2, *, level: int = 9, noise: bool = False) -> bytes:
    """A valid RGB PNG of ``width`` x ``height`` (random pixels if ``noise``)."""
    row = width * 3
    if noise:
        import random

        rng = random.Random(width * 7919 + height)
        raw = b"".join(b"\0" + rng.randbytes(row) for _ in range(height))
    else:
        raw = (b"\0" + b"\x80" * row) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, level))
        + _chunk(b"IEND", b"")
    )


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR chunk: its pixel size, without pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)


@functools.cache
def big_png() -> bytes:
    """A valid 3,200 x 3,200 PNG of noise, stored uncompressed: about 30.7 MB."""
    return png(3200, 3200, level=0, noise=True)


def gif(width: int = 1, height: int = 1) -> bytes:
    """A valid one-colour GIF."""
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0x80, 0, 0)
        + b"\0\0\0\xff\xff\xff"
        + b"\x2c"
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + b"\x02\x02\x44\x01\x00\x3b"
    )


def jpeg_header(width: int, height: int, *, exif_bytes: int = 0) -> bytes:
    """A JPEG's start: SOI, a JFIF APP0, an optional APP1 of ``exif_bytes``, then SOF0."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    app1 = b""
    while exif_bytes > 0:
        size = min(exif_bytes, 65_000)
        app1 += b"\xff\xe1" + struct.pack(">H", size + 2) + b"\0" * size
        exif_bytes -= size
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\0" * 3
    return b"\xff\xd8" + app0 + app1 + sof + b"\xff\xd9"


def webp_header(width: int, height: int, *, kind: str = "VP8X") -> bytes:
    """A WebP's RIFF header and first chunk: extended (VP8X), lossy (VP8) or lossless (VP8L)."""
    if kind == "VP8X":
        chunk = b"\0\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    elif kind == "VP8 ":
        chunk = b"\0\0\0" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height)
    else:
        bits = (width - 1) | (height - 1) << 14
        chunk = b"\x2f" + bits.to_bytes(4, "little")
    body = kind.encode() + struct.pack("<I", len(chunk)) + chunk
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def wav(seconds: float = 0.1, rate: int = 8000) -> bytes:
    """A valid mono 16-bit PCM WAV of silence."""
    data = b"\0\0" * int(seconds * rate)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data"
    body += struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def b64(data: bytes) -> str:
    """Base64 text of ``data``."""
    return base64.b64encode(data).decode()


def inline(mime: str, data: bytes, name: str | None = None) -> InlineDataPart:
    """An inline media part, saved (``persisted_file``) under ``SAVED/name`` when named."""
    saved = SAVED / name if name is not None else None
    return InlineDataPart(
        inline_data=InlineData(mime_type=mime, data=b64(data), persisted_file=saved)
    )


def turn_of(responses: list[ToolCallResponse], *context: str, stop: str | None = None) -> Turn:
    """A finalized turn: the responses' parts, then the context texts, then the stop reason."""
    parts: list[Part] = [part for response in responses for part in response.parts]
    parts += [TextPart(text=text) for text in context]
    if stop is not None:
        parts.append(TextPart(text=stop))
    return Turn(responses=responses, parts=parts, stop_reason=stop)


def _call(call_id: str, name: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, args={})


def media_turn(*media: Part, text: str = "screenshot taken") -> Turn:
    """One successful call ``call_media`` returning ``text`` and ``media``."""
    response = ToolCallResponse.from_result(
        _call("call_media", "mcp__browser__screenshot"),
        ToolResult(content=[TextPart(text=text), *media]),
    )
    return turn_of([response])


def hook_turn() -> Turn:
    """Two calls, hook context and a hook stop."""
    ok = ToolCallResponse.from_result(_call("call_a", "read_file"), ToolResult(content="ok"))
    failed = ToolCallResponse.from_result(
        _call("call_b", "run_shell_command"),
        ToolResult.failure("exit code 1", content="tests: 3 failed"),
    )
    return turn_of(
        [ok, failed],
        "PostToolBatch hook: lint found 2 warnings",
        stop="Stopped by a PostToolBatch hook: the tests fail",
    )


def sample_turns() -> dict[str, Turn]:
    """Turns with every kind of response a model must be able to receive."""
    success = ToolCallResponse.from_result(
        _call("call_1", "read_file"), ToolResult(content="hello")
    )
    error = ToolCallResponse.from_result(
        _call("call_2", "run_shell_command"), ToolResult.failure("exit code 2", content="partial")
    )
    cancelled = ToolCallResponse.failed(
        _call("call_3", "run_shell_command"), "cancelled by the user", status="cancelled"
    )
    duplicate = ToolCallResponse.failed(
        _call("call_1", "read_file"),
        "tool call id 'call_1' was already answered; it was not run again",
        status="duplicate",
        error_type="duplicate_call",
    )
    empty = ToolCallResponse.from_result(_call("call_4", "touch"), ToolResult(content=""))
    structured = ToolCallResponse(
        call_id="call_5",
        name="mcp__db__query",
        parts=[
            FunctionResponsePart(
                function_response=FunctionResponse(
                    id="call_5",
                    name="mcp__db__query",
                    response={"output": {"rows": [1, 2]}, "exit_code": 0},
                )
            )
        ],
    )
    file_ref = FileDataPart(
        file_data=FileData(mime_type="application/pdf", file_uri="gs://bucket/report.pdf")
    )
    return {
        "errors": turn_of([success, error]),
        "cancellations": turn_of([cancelled, success]),
        "duplicates": turn_of([success, duplicate]),
        "empty output": turn_of([empty]),
        "structured output": turn_of([structured]),
        "image": media_turn(inline("image/png", png(64, 48), "shot.png")),
        "jpeg, gif and webp": media_turn(
            inline("image/jpg", jpeg_header(640, 480), "a.jpg"),
            inline("image/gif", gif(), "b.gif"),
            inline("image/webp", webp_header(800, 600), "c.webp"),
        ),
        "audio": media_turn(inline("audio/wav", wav(), "speech.wav"), text="recorded"),
        "unsaved audio": media_turn(inline("audio/wav", wav()), text="recorded"),
        "file reference": media_turn(file_ref, text="report"),
        "hook stop and context": hook_turn(),
        "stray media": Turn(
            responses=[],
            parts=[inline("image/png", png(), "stray.png"), TextPart(text="context only")],
        ),
        "nothing": Turn(responses=[], parts=[]),
    }
