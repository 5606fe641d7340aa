"""A real MCP server for toolbatch's tests, written with the SDK's own ``MCPServer``.

Run it as ``python tests/mcp_server/server.py`` (stdio) or
``python tests/mcp_server/server.py --http --port 8765`` (streamable HTTP on 127.0.0.1, path
``/mcp``), or ``--sse --port 8765`` (legacy HTTP+SSE, path ``/sse``). The scheduler, chaos
and CLI tests use it too, so its tools are a contract:

============== ==================================================================
tool           what it does
============== ==================================================================
echo           ``echo(text)`` returns ``text`` unchanged.
big_text       ``big_text(n_chars)`` returns exactly ``n_chars`` characters of ASCII lines
               (``"line 000001 abc...\\n"``), deterministic for a given size.
texts          ``texts(sizes)`` returns one text part per size; part ``i`` repeats the letter
               ``"abcdefghij"[i % 10]`` on lines of 80, so every part has distinct content.
image          ``image(width=16, height=16)`` returns a real PNG (``image/png``).
audio          ``audio()`` returns a short real WAV (``audio/wav``).
fail           ``fail(message)`` raises ``ToolError(message)``: ``isError`` with the message.
slow           ``slow(seconds, steps=5)`` sleeps ``seconds`` in ``steps`` steps, reporting
               progress ``(i, steps, "step i")`` after each; returns ``"slept <seconds> s"``.
mixed          ``mixed()`` returns text, a PNG image, an embedded text resource
               (``file:///tmp/report.txt``, text ``"quarterly report body"``) and a resource
               link (``big.log`` at ``file:///tmp/big.log``).
blob           ``blob()`` returns text and an embedded binary resource: a small PDF
               (``file:///tmp/report.pdf``, ``application/pdf``, ``%PDF-1.4`` + bytes
               0..255), base64 in ``blob``.
structured     ``structured(n)`` returns a model: ``{"files": n, "bytes": 100 * n, "names": [...]}``
               as structured content (with its JSON as text).
crash          ``crash(exit_code=3)`` writes a line to stderr, then exits the process at once
               with ``exit_code``, mid-call (no response is ever sent).
lone_surrogate ``lone_surrogate()`` returns ``"cut emoji: \\ud83d"``; on stdio it is written
               the way JavaScript's ``JSON.stringify`` writes it (a ``\\ud83d`` escape), which
               pydantic-core rejects.
stderr_noise   ``stderr_noise(text)`` writes ``text`` to stderr and returns ``"noise written"``.
env            ``env()`` returns the server's environment as a JSON object (text).
spawn_child    ``spawn_child(seconds=300)`` starts ``sleep <seconds>`` in the server's process
               group and returns its pid.
pid            ``pid()`` returns the server's own pid.
header         ``header(name)`` returns that HTTP request header's value (``""`` on stdio or
               when absent).
add_tool       ``add_tool(name)`` registers a new tool ``name`` (it returns ``"<name> here"``)
               and sends ``notifications/tools/list_changed``.
task_only      listed with ``execution.taskSupport == "required"`` (MCP tasks); called
               plainly it returns ``"task_only ran"``.
meta           ``meta()`` returns the ``params._meta`` of its own ``tools/call`` request as a
               JSON object (text), e.g. the ``traceparent`` a client injected.
============== ==================================================================

On stdio the server uses its own line transport (the SDK's ``stdio_server`` cannot write a
lone surrogate at all: its writer dies and the server stops answering). Messages are
otherwise byte-identical to the SDK's: ``model_dump_json(by_alias=True, exclude_unset=True)``.
"""

from __future__ import annotations

if __name__ == "__main__":
    # Started about 70 times a test run, and most of its start is importing the SDK: its
    # pydantic models are built when first used instead of all at import, and the collector
    # stays off while the modules load (turned back on in ``main``). Together about a
    # quarter of the start's CPU. Only when run as a server: tests import this module too.
    import gc

    import pydantic

    gc.disable()
    pydantic.BaseModel.model_config["defer_build"] = True

import argparse
import base64
import io
import json
import os
import struct
import subprocess
import sys
import wave
import zlib

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Audio, Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import SessionMessage
from mcp_types import (
    BlobResourceContents,
    EmbeddedResource,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolExecution,
    jsonrpc_message_adapter,
)
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

mcp = MCPServer("toolbatch-test-server", version="1.0")


def _png(width: int, height: int) -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 13 % 256, y * 7 % 256, 128)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _wav() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"".join(struct.pack("<h", (i * 997) % 20000 - 10000) for i in range(800)))
    return buffer.getvalue()


def _lines(n_chars: int, letter: str | None = None) -> str:
    if letter is not None:
        line = letter * 79 + "\n"
        return (line * (n_chars // len(line) + 1))[:n_chars]
    parts: list[str] = []
    total = 0
    index = 0
    while total < n_chars:
        index += 1
        line = f"line {index:06d} " + "abcdefghijklmnopqrstuvwxyz" * 3 + "\n"
        parts.append(line)
        total += len(line)
    return "".join(parts)[:n_chars]


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def big_text(n_chars: int) -> str:
    """Return exactly n_chars characters of ASCII lines."""
    return _lines(n_chars)


@mcp.tool()
def texts(sizes: list[int]) -> list[TextContent]:
    """Return one text part per requested size, each with distinct content."""
    return [
        TextContent(type="text", text=_lines(size, "abcdefghij"[i % 10]))
        for i, size in enumerate(sizes)
    ]


@mcp.tool()
def image(width: int = 16, height: int = 16) -> Image:
    """Return a PNG image of the given size."""
    return Image(data=_png(width, height), format="png")


@mcp.tool()
def audio() -> Audio:
    """Return a short WAV clip."""
    return Audio(data=_wav(), format="wav")


@mcp.tool()
def fail(message: str) -> str:
    """Fail with the given message."""
    raise ToolError(message)


@mcp.tool()
async def slow(seconds: float, steps: int = 5, ctx: Context | None = None) -> str:
    """Sleep for `seconds`, reporting progress after each of `steps` steps."""
    for step in range(1, steps + 1):
        await anyio.sleep(seconds / steps)
        if ctx is not None:
            await ctx.report_progress(step, steps, f"step {step}")
    return f"slept {seconds:g} s"


@mcp.tool()
def mixed() -> list[TextContent | Image | EmbeddedResource | ResourceLink]:
    """Return text, an image, an embedded resource and a resource link."""
    return [
        TextContent(type="text", text="mixed: text part"),
        Image(data=_png(4, 4), format="png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="file:///tmp/report.txt", mime_type="text/plain", text="quarterly report body"
            ),
        ),
        ResourceLink(
            type="resource_link", name="big.log", uri="file:///tmp/big.log", mime_type="text/plain"
        ),
    ]


PDF_BYTES = b"%PDF-1.4\n" + bytes(range(256))


@mcp.tool()
def blob() -> list[TextContent | EmbeddedResource]:
    """Return text and an embedded binary resource (a small PDF)."""
    return [
        TextContent(type="text", text="the report:"),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///tmp/report.pdf",
                mime_type="application/pdf",
                blob=base64.b64encode(PDF_BYTES).decode(),
            ),
        ),
    ]


class Stats(BaseModel):
    files: int
    bytes: int
    names: list[str]


@mcp.tool()
def structured(n: int) -> Stats:
    """Return statistics as structured content."""
    return Stats(files=n, bytes=100 * n, names=[f"file{i}.txt" for i in range(n)])


@mcp.tool()
def crash(exit_code: int = 3) -> str:
    """Exit the server process at once, mid-call."""
    sys.stderr.write("test server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(exit_code)


@mcp.tool()
def lone_surrogate() -> str:
    """Return text ending in a lone high surrogate, as a split emoji."""
    return "cut emoji: \ud83d"


@mcp.tool()
def stderr_noise(text: str) -> str:
    """Write text to stderr."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return "noise written"


@mcp.tool()
def env() -> str:
    """Return the server's environment as a JSON object."""
    return json.dumps(dict(sorted(os.environ.items())))


@mcp.tool()
def spawn_child(seconds: float = 300) -> int:
    """Start `sleep seconds` in this process group and return its pid."""
    child = subprocess.Popen(
        ["sleep", f"{seconds:g}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child.pid


@mcp.tool()
def pid() -> int:
    """Return this server's pid."""
    return os.getpid()


@mcp.tool()
def header(name: str, ctx: Context | None = None) -> str:
    """Return the value of an HTTP request header ("" when absent or on stdio)."""
    request = ctx.request_context.request if ctx is not None else None
    headers = getattr(request, "headers", None)
    return "" if headers is None else str(headers.get(name, ""))


@mcp.tool()
async def add_tool(name: str, ctx: Context | None = None) -> str:
    """Register a new tool and tell the client the list changed."""

    def added() -> str:
        return f"{name} here"

    mcp.add_tool(added, name=name, description=f"added at run time: {name}")
    if ctx is not None:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
def task_only() -> str:
    """A tool that declares it must run as an MCP task."""
    return "task_only ran"


_plain_list_tools = mcp.list_tools


async def _list_tools_with_task_support():  # type: ignore[no-untyped-def]
    tools = await _plain_list_tools()
    return [
        tool.model_copy(update={"execution": ToolExecution(task_support="required")})
        if tool.name == "task_only"
        else tool
        for tool in tools
    ]


mcp.list_tools = _list_tools_with_task_support  # type: ignore[method-assign]


@mcp.tool()
def meta(ctx: Context | None = None) -> str:
    """Return the params._meta of this tools/call request as a JSON object."""
    received = ctx.request_context.meta if ctx is not None else None
    return json.dumps(dict(received or {}), default=str)


def _encode(message: SessionMessage) -> bytes:
    try:
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        # JSON.stringify's output for a lone surrogate: an escape, which is valid JSON.
        data = message.message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


async def _serve_stdio() -> None:
    # Take the wire off fds 0/1 so a stray print() or a child cannot corrupt it.
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)

    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_loop() -> None:
        async with read_send:
            while line := await anyio.to_thread.run_sync(wire_in.readline, abandon_on_cancel=True):
                if not line.strip():
                    continue
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    def write(data: bytes) -> None:
        wire_out.write(data)
        wire_out.flush()

    async def write_loop() -> None:
        async with write_receive:
            async for message in write_receive:
                await anyio.to_thread.run_sync(write, _encode(message))

    lowlevel = mcp._lowlevel_server  # the public run() only serves stdio via stdio_server()
    async with anyio.create_task_group() as tg:
        tg.start_soon(read_loop)
        tg.start_soon(write_loop)
        await lowlevel.run(read_receive, write_send, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    parser.add_argument("--sse", action="store_true", help="serve the legacy HTTP+SSE transport")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    if args.http:
        mcp.run("streamable-http", host="127.0.0.1", port=args.port)
    elif args.sse:
        mcp.run("sse", host="127.0.0.1", port=args.port)
    else:
        anyio.run(_serve_stdio)
        # Interpreter teardown of the SDK's modules takes most of a second; nothing is left
        # to flush, so exit at once when the client closes stdin.
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    gc.freeze()
    gc.enable()
    main()
