"""@toolbatch.tool: typed Python functions as tools, validated and described for the model."""

from __future__ import annotations

import asyncio
import base64
import gzip
import struct
import threading
import zlib
from pathlib import Path
from typing import Literal

import anyio
import pytest
from pydantic import BaseModel

from toolbatch import (
    ArtifactStore,
    FunctionResponsePart,
    InlineDataPart,
    Registry,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
)
from toolbatch.errors import ToolRegistrationError
from toolbatch.producers import ProducerContext
from toolbatch.producers._function import FunctionTool, tool


@tool
async def search(pattern: str, max_hits: int = 10, mode: Literal["fast", "exact"] = "fast") -> str:
    """Search the project for a pattern.

    Args:
        pattern: a regular expression.
        max_hits: stop after this many hits.
    """
    return f"{pattern}:{max_hits}:{mode}"


def _ctx() -> ProducerContext:
    return ProducerContext()


def test_schema_and_description_come_from_the_signature_and_docstring() -> None:
    """The declaration has the name, the docstring summary and a JSON schema of the args."""
    declaration = search.declaration
    assert declaration.name == "search"
    assert declaration.description == "Search the project for a pattern."
    schema = declaration.input_schema
    assert schema["required"] == ["pattern"]
    props = schema["properties"]
    assert isinstance(props, dict)
    assert props["pattern"] == {
        "description": "a regular expression.",
        "title": "Pattern",
        "type": "string",
    }
    assert props["mode"]["enum"] == ["fast", "exact"]  # type: ignore[index]
    assert schema["additionalProperties"] is False


async def test_valid_arguments_reach_the_function() -> None:
    """Arguments are validated and passed; defaults fill the rest."""
    result = await search.run(ToolCall(id="1", name="search", args={"pattern": "x+"}), _ctx())
    assert result.error is None
    assert result.content == "x+:10:fast"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param({}, "pattern: Field required", id="missing"),
        pytest.param({"pattern": "x", "max_hits": "many"}, "max_hits", id="wrong-type"),
        pytest.param({"pattern": "x", "mode": "slow"}, "mode", id="bad-literal"),
        pytest.param({"pattern": "x", "colour": 1}, "colour: Extra inputs", id="unknown-arg"),
    ],
)
async def test_invalid_arguments_become_a_clear_error(
    args: dict[str, object], fragment: str
) -> None:
    """Bad arguments give an invalid_args failure naming the field; the function never runs."""
    result = await search.run(ToolCall(id="1", name="search", args=args), _ctx())  # type: ignore[arg-type]
    assert result.error is not None
    assert result.error.type == "invalid_args"
    assert fragment in result.error.message
    assert "'search'" in result.error.message


async def test_a_tool_without_arguments_still_refuses_any() -> None:
    """A tool that takes no arguments runs with none and rejects one it was given."""
    ran: list[str] = []

    @tool
    async def ping() -> str:
        """Answer pong."""
        ran.append("ping")
        return "pong"

    result = await ping.run(ToolCall(id="1", name="ping"), _ctx())
    assert result.error is None
    assert result.content == "pong"
    refused = await ping.run(ToolCall(id="2", name="ping", args={"loud": True}), _ctx())
    assert refused.error is not None
    assert refused.error.type == "invalid_args"
    assert "loud: Extra inputs" in refused.error.message
    assert ran == ["ping"]


async def test_sync_functions_run_in_a_worker_thread() -> None:
    """A sync tool runs off the event loop thread."""
    loop_thread = threading.get_ident()

    @tool
    def where() -> str:
        """Report the thread."""
        return "worker" if threading.get_ident() != loop_thread else "loop"

    result = await where.run(ToolCall(id="1", name="where"), _ctx())
    assert result.content == "worker"


async def test_context_parameter_is_injected_not_declared() -> None:
    """A ProducerContext parameter receives the context and is not in the schema."""

    @tool(name="ctx_tool")
    async def uses_context(n: int, context: ProducerContext) -> str:
        context.progress(f"working on {n}")
        return "ok"

    messages: list[str] = []
    ctx = ProducerContext(progress=messages.append)
    assert "context" not in uses_context.declaration.input_schema["properties"]  # type: ignore[operator]
    result = await uses_context.run(ToolCall(id="1", name="ctx_tool", args={"n": 3}), ctx)
    assert result.content == "ok"
    assert messages == ["working on 3"]


async def test_a_slow_tool_times_out_with_a_clear_error() -> None:
    """A tool past its timeout is stopped and reported as a timeout."""

    @tool(timeout_s=0.1)
    async def slow() -> str:
        await anyio.sleep(30)
        return "never"

    with anyio.fail_after(5):
        result = await slow.run(ToolCall(id="1", name="slow"), _ctx())
    assert result.error is not None
    assert result.error.type == "timeout"
    assert "0.1 s" in result.error.message


async def test_a_hung_sync_tool_is_abandoned_and_told_to_stop() -> None:
    """A sync tool that blocks is abandoned at its timeout; it sees context.cancelled set."""
    release = threading.Event()

    @tool(timeout_s=0.2)
    def stuck(context: ProducerContext) -> str:
        release.wait(10)
        return "late"

    ctx = _ctx()
    with anyio.fail_after(5):
        result = await stuck.run(ToolCall(id="1", name="stuck"), ctx)
    release.set()
    assert result.error is not None
    assert result.error.type == "timeout"
    assert ctx.cancelled.is_set()


class Stats(BaseModel):
    files: int
    names: list[str]


@pytest.mark.parametrize(
    ("value", "content", "display"),
    [
        pytest.param(None, "", None, id="none"),
        pytest.param("plain", "plain", None, id="str"),
        pytest.param(-101, "-101", -101, id="int"),
        pytest.param(True, "true", True, id="bool"),
        pytest.param(2.5, "2.5", 2.5, id="float"),
        pytest.param({"a": [1, 2]}, '{"a": [1, 2]}', {"a": [1, 2]}, id="dict"),
        pytest.param([1, "x"], '[1, "x"]', [1, "x"], id="list"),
        pytest.param(
            Stats(files=2, names=["a"]),
            '{"files":2,"names":["a"]}',
            {"files": 2, "names": ["a"]},
            id="model",
        ),
    ],
)
async def test_return_values_are_wrapped(value: object, content: str, display: object) -> None:
    """Whatever the function returns becomes model text (and a display value when rich)."""

    @tool
    def give() -> object:
        return value

    result = await give.run(ToolCall(id="1", name="give"), _ctx())
    assert result.content == content
    assert result.display == display


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG image."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80\x40\x20" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def returning(value: object) -> FunctionTool:
    @tool(name="give")
    def give() -> object:
        return value

    return give


async def test_returned_bytes_are_persisted_as_a_binary_artifact_never_decoded(
    tmp_path: Path,
) -> None:
    """bytes of no known kind: one .bin artifact holding exactly them, described by size."""
    data = b"\x89not-a-png\xff\x00" * 1000
    store = ArtifactStore(tmp_path)
    call = ToolCall(id="b1", name="give")
    result = await returning(bytearray(data)).run(call, ProducerContext(store=store))
    [path] = store.written
    assert path.suffix == ".bin"
    assert path.read_bytes() == data
    assert result.persisted_output_files == (path,)
    description = f"[binary result: 12,000 bytes, not shown; saved to: {path}]"
    assert result.content == [TextPart(text=description)]
    assert result.display == description
    response = ToolCallResponse.from_result(call, result)
    assert response.parts[0].function_response.response == {"output": description}  # type: ignore[union-attr]
    assert "\ufffd" not in response.model_dump_json()


async def test_returned_image_bytes_are_persisted_once_and_attached(tmp_path: Path) -> None:
    """PNG bytes: a .png artifact, a description, and the image inline for the model."""
    image = png()
    store = ArtifactStore(tmp_path)
    result = await returning(image).run(
        ToolCall(id="i1", name="give"), ProducerContext(store=store)
    )
    [path] = store.written
    assert (path.suffix, path.read_bytes()) == (".png", image)
    description, attached = result.content
    assert description == TextPart(
        text=f"[binary result: {len(image):,} bytes, PNG image, attached below; saved to: {path}]"
    )
    assert isinstance(attached, InlineDataPart)
    assert attached.inline_data.mime_type == "image/png"
    assert base64.b64decode(attached.inline_data.data) == image
    assert attached.inline_data.persisted_file == path


@pytest.mark.parametrize(
    ("data", "kind", "suffix"),
    [
        pytest.param(b"%PDF-1.7\n" + bytes(range(256)), "PDF document", ".pdf", id="pdf"),
        pytest.param(gzip.compress(b"log line\n" * 100), "gzip archive", ".gz", id="gzip"),
        pytest.param(b"\xff\xd8\xff" + b"\x00" * 6_000_000, "JPEG image", ".jpg", id="big-jpeg"),
    ],
)
async def test_known_kinds_are_named_and_only_small_images_are_attached(
    tmp_path: Path, data: bytes, kind: str, suffix: str
) -> None:
    """The magic number names the kind and the suffix; other kinds (and huge images) are
    described, not attached."""
    store = ArtifactStore(tmp_path)
    result = await returning(memoryview(data)).run(
        ToolCall(id="k", name="give"), ProducerContext(store=store)
    )
    [path] = store.written
    assert (path.suffix, path.read_bytes() == data) == (suffix, True)
    assert result.content == [
        TextPart(text=f"[binary result: {len(data):,} bytes, {kind}, not shown; saved to: {path}]")
    ]


async def test_bytes_without_a_store_say_they_were_not_saved() -> None:
    """No artifact store: the model is told the size and that nothing was kept."""
    result = await returning(b"\x00\x01").run(ToolCall(id="n", name="give"), _ctx())
    assert result.content == [
        TextPart(
            text="[binary result: 2 bytes, not shown; it was not saved to a file (no artifact "
            "store is configured)]"
        )
    ]
    assert result.persisted_output_files == ()


async def test_returning_parts_keeps_them() -> None:
    """A tool returning parts gets them as its content."""

    @tool
    def parts() -> list[TextPart]:
        return [TextPart(text="a"), TextPart(text="b")]

    result = await parts.run(ToolCall(id="1", name="parts"), _ctx())
    response = ToolCallResponse.from_result(ToolCall(id="1", name="parts"), result)
    first = response.parts[0]
    assert isinstance(first, FunctionResponsePart)
    assert first.function_response.response == {"output": "a\nb"}


def test_decorated_function_is_still_callable() -> None:
    """@tool keeps the function usable directly."""

    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert isinstance(add, FunctionTool)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: tool(name="has space")(lambda: 1), id="bad-name"),
        pytest.param(lambda: tool(name="")(lambda: 1), id="empty-name"),
        pytest.param(lambda: FunctionTool(lambda *a: 1, name="varargs"), id="varargs"),
        pytest.param(lambda: tool(output_threshold=0)(lambda: 1), id="zero-threshold"),
        pytest.param(lambda: tool(timeout_s=-1)(lambda: 1), id="negative-timeout"),
    ],
)
def test_bad_tool_definitions_are_rejected(make: object) -> None:
    """Bad names, *args and bad options raise ToolRegistrationError at definition time."""
    with pytest.raises(ToolRegistrationError):
        make()  # type: ignore[operator]


@tool
def raises_cancelled_sync() -> str:
    """Raise CancelledError from a worker thread."""
    raise asyncio.CancelledError


@tool
async def raises_cancelled_async() -> str:
    """Raise CancelledError without being cancelled."""
    raise asyncio.CancelledError


async def test_a_tool_raising_cancelled_error_is_its_own_failure_not_a_timeout(
    tmp_path: Path,
) -> None:
    """Nothing cancelled the call: it failed, and says so (not "did not finish within")."""
    registry = Registry([raises_cancelled_sync, raises_cancelled_async])
    config = SchedulerConfig(artifacts_dir=tmp_path)
    async with ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch(
            [
                ToolCall(id="s", name="raises_cancelled_sync"),
                ToolCall(id="a", name="raises_cancelled_async"),
            ]
        )
    for response in turn.responses:
        assert response.status == "error"
        assert response.error_type == "tool_crashed"
        assert "raised CancelledError" in (response.error or "")
