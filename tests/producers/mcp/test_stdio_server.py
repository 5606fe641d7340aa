"""Calls against the real test server over stdio: content, media, errors, progress, limits."""

from __future__ import annotations

import base64
import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from anyio.from_thread import BlockingPortal

from tests.producers.mcp._support import call_tool, model_response, run, running, stdio_entry
from toolbatch import ArtifactStore, InlineDataPart, ToolResult
from toolbatch.producers import Producer
from toolbatch.producers.mcp import DEFAULT_INHERITED_ENV_VARS, McpServers, McpToolProducer

SECRET = "TOOLBATCH_TEST_AGENT_SECRET"
TOOLS = {
    "echo",
    "big_text",
    "texts",
    "image",
    "audio",
    "fail",
    "slow",
    "mixed",
    "blob",
    "structured",
    "crash",
    "lone_surrogate",
    "stderr_noise",
    "env",
    "spawn_child",
    "pid",
    "header",
    "add_tool",
    "meta",
}
"""The test server's tools as offered (``task_only`` requires MCP tasks: not offered)."""


@pytest.fixture(scope="module")
def servers(portal: BlockingPortal) -> Iterator[McpServers]:
    """The test server twice: ``t`` with defaults, ``limited`` with a 1 s call timeout
    (Claude Code ignores per-server timeouts under 1000 ms; so does toolbatch)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET, "do-not-leak")
        document = {
            "t": stdio_entry(env={"TOOLBATCH_TEST_GIVEN": "from-config"}),
            "limited": stdio_entry(timeout=1000),
        }
        with running(portal, document) as started:
            yield started


def inline_parts(result: ToolResult) -> list[InlineDataPart]:
    assert isinstance(result.content, list)
    return [part for part in result.content if isinstance(part, InlineDataPart)]


def test_every_tool_is_exposed_with_its_description_and_schema(servers: McpServers) -> None:
    """Discovery: mcp__<server>__<tool> for each tool, with the server's schema."""
    assert servers.failures == {}
    names = {producer.declaration.name for producer in servers.producers()}
    assert names == {f"mcp__{server}__{tool}" for server in ("t", "limited") for tool in TOOLS}
    echo = servers.producer("mcp__t__echo")
    assert isinstance(echo, Producer)
    assert isinstance(echo, McpToolProducer)
    assert (echo.server, echo.tool_name) == ("t", "echo")
    declaration = echo.declaration
    assert declaration.description == "Return the text unchanged."
    assert declaration.needs_permission is False
    schema = declaration.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["text"]
    assert isinstance(schema["properties"], dict)
    assert "text" in schema["properties"]


def test_text_comes_back_as_the_output(portal: BlockingPortal, servers: McpServers) -> None:
    """A plain call returns the server's text as the function response output."""
    result = run(portal, servers, "mcp__t__echo", {"text": "hello, 世界 😀"})
    assert model_response("mcp__t__echo", result) == {"output": "hello, 世界 😀"}
    assert result.persisted_output_files is None
    assert isinstance(result.display, dict)
    assert result.display["structuredContent"] == {"result": "hello, 世界 😀"}


def test_an_image_reaches_the_model_untouched(portal: BlockingPortal, servers: McpServers) -> None:
    """The server's PNG arrives as inlineData, the exact bytes of a 5x3 image."""
    result = run(portal, servers, "mcp__t__image", {"width": 5, "height": 3})
    [image] = inline_parts(result)
    assert image.inline_data.mime_type == "image/png"
    png = base64.b64decode(image.inline_data.data, validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", png[16:24]) == (5, 3)
    assert model_response("mcp__t__image", result) == {"output": ""}


def test_audio_reaches_the_model_untouched(portal: BlockingPortal, servers: McpServers) -> None:
    """Audio is inlineData too (a real WAV)."""
    [sound] = inline_parts(run(portal, servers, "mcp__t__audio"))
    assert sound.inline_data.mime_type == "audio/wav"
    wav = base64.b64decode(sound.inline_data.data, validate=True)
    assert wav[:4] == b"RIFF"
    assert wav[8:12] == b"WAVE"


def test_a_tool_error_is_an_error_response(portal: BlockingPortal, servers: McpServers) -> None:
    """isError from the server fails the call with the server's message."""
    result = run(portal, servers, "mcp__t__fail", {"message": "disk is full"})
    assert result.error is not None
    assert result.error.type == "mcp_tool_error"
    assert "disk is full" in result.error.message
    assert model_response("mcp__t__fail", result) == {"error": result.error.message}


def test_bad_arguments_are_reported_by_the_server(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Arguments that fail the server's validation give an error response, not a crash."""
    result = run(portal, servers, "mcp__t__echo", {"txt": "typo"})
    assert result.error is not None
    assert "text" in result.error.message


def test_mixed_content_keeps_its_order_and_kinds(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Text, an embedded resource and a link become text; the image stays media."""
    result = run(portal, servers, "mcp__t__mixed")
    assert model_response("mcp__t__mixed", result) == {
        "output": "mixed: text part\n"
        "[Resource <file:///tmp/report.txt> (text/plain)]\nquarterly report body\n"
        "[Resource link: big.log <file:///tmp/big.log> (text/plain)]"
    }
    [image] = inline_parts(result)
    assert image.inline_data.mime_type == "image/png"


def test_an_embedded_binary_resource_is_saved_and_referenced(
    portal: BlockingPortal, servers: McpServers, tmp_path: Path
) -> None:
    """A blob resource is not dropped: its exact bytes go to a .pdf artifact, the model
    gets the size and the path."""
    store = ArtifactStore(tmp_path)
    result = run(portal, servers, "mcp__t__blob", store=store)
    [artifact] = store.written
    assert artifact.suffix == ".pdf"
    assert artifact.read_bytes() == b"%PDF-1.4\n" + bytes(range(256))
    assert model_response("mcp__t__blob", result) == {
        "output": "the report:\n[Resource <file:///tmp/report.pdf> (application/pdf): 265 bytes "
        f"of binary data, not shown; saved to: {artifact}]"
    }


def test_structured_content_is_kept_for_display(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """The model sees the text; the display keeps structuredContent."""
    result = run(portal, servers, "mcp__t__structured", {"n": 2})
    output = model_response("mcp__t__structured", result)["output"]
    assert json.loads(output) == {"files": 2, "bytes": 200, "names": ["file0.txt", "file1.txt"]}
    assert isinstance(result.display, dict)
    assert result.display["structuredContent"] == json.loads(output)


def test_progress_is_reported_while_the_call_runs(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Each progress notification reaches context.progress as a short message."""
    messages: list[str] = []
    result = run(
        portal, servers, "mcp__t__slow", {"seconds": 0.15, "steps": 3}, progress=messages.append
    )
    assert model_response("mcp__t__slow", result) == {"output": "slept 0.15 s"}
    assert sorted(messages) == ["step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"]


@pytest.mark.parametrize(
    ("tool", "timeout_s", "limit"),
    [
        pytest.param("mcp__limited__slow", None, "1 s", id="server-timeout-from-config"),
        pytest.param("mcp__t__slow", 0.3, "0.3 s", id="runtime-timeout-caps-the-default"),
    ],
)
def test_a_stuck_call_times_out_and_the_server_keeps_answering(
    portal: BlockingPortal, servers: McpServers, tool: str, timeout_s: float | None, limit: str
) -> None:
    """No call outlives its timeout; the same session serves the next call."""
    started = time.monotonic()
    result = run(portal, servers, tool, {"seconds": 30, "steps": 1}, timeout_s=timeout_s)
    assert time.monotonic() - started < 5
    assert result.error is not None
    assert result.error.type == "timeout"
    assert limit in result.error.message
    echo = tool.replace("slow", "echo")
    assert model_response(echo, run(portal, servers, echo, {"text": "still here"})) == {
        "output": "still here"
    }


def test_concurrent_calls_on_one_session_keep_their_own_results(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Forty echoes and slow calls at once: each gets its own answer."""

    async def batch() -> list[ToolResult]:
        results: dict[int, ToolResult] = {}

        async def one(index: int) -> None:
            if index % 10 == 0:
                args: dict[str, Any] = {"seconds": 0.2, "steps": 2}
                results[index] = await call_tool(servers, "mcp__t__slow", args)
            else:
                text = f"call {index}: " + "x" * index
                results[index] = await call_tool(servers, "mcp__t__echo", {"text": text})

        async with anyio.create_task_group() as tg:
            for index in range(40):
                tg.start_soon(one, index)
        return [results[index] for index in range(40)]

    for index, result in enumerate(portal.call(batch)):
        expected = "slept 0.2 s" if index % 10 == 0 else f"call {index}: " + "x" * index
        assert model_response("t", result) == {"output": expected}


def test_large_text_is_persisted_once_and_previewed(
    portal: BlockingPortal, servers: McpServers, tmp_path: Path
) -> None:
    """A 600,000-char result: the file holds all of it, the model gets ~2,000 chars."""
    store = ArtifactStore(tmp_path)
    result = run(portal, servers, "mcp__t__big_text", {"n_chars": 600_000}, store=store)
    [path] = result.persisted_output_files or ()
    saved = path.read_text()
    assert len(saved) == 600_000
    assert saved.startswith("line 000001 abc")
    output = model_response("mcp__t__big_text", result)["output"]
    assert str(path) in output
    assert len(output) < 2_500
    assert isinstance(result.display, dict)
    assert result.display["text"] == saved


def test_several_large_parts_give_one_file_holding_them_all(
    portal: BlockingPortal, servers: McpServers, tmp_path: Path
) -> None:
    """Parts over the trigger make the whole output one artifact and one preview."""
    store = ArtifactStore(tmp_path)
    result = run(portal, servers, "mcp__t__texts", {"sizes": [600_000, 12, 510_000]}, store=store)
    [path] = result.persisted_output_files or ()
    saved = path.read_text()
    assert len(saved) == 600_000 + 1 + 12 + 1 + 510_000
    assert saved[600_000:600_014] == "\n" + "b" * 12 + "\n"
    output = model_response("mcp__t__texts", result)["output"]
    assert output.count(str(path)) == 1
    assert len(output) < 2_500


def test_a_lone_surrogate_from_the_server_does_not_hang_the_call(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """JSON.stringify-style "\\ud83d" arrives as U+FFFD, well within the timeout."""
    started = time.monotonic()
    result = run(portal, servers, "mcp__t__lone_surrogate", timeout_s=10)
    assert time.monotonic() - started < 5
    assert model_response("t", result) == {"output": "cut emoji: \ufffd"}


def test_a_lone_surrogate_in_the_arguments_is_scrubbed(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Arguments the SDK could not serialize reach the server with U+FFFD."""
    result = run(portal, servers, "mcp__t__echo", {"text": "a\udcffb \ud83d"}, timeout_s=10)
    assert model_response("t", result) == {"output": "a\ufffdb \ufffd"}


def test_server_stderr_goes_to_the_log_never_to_the_output(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """What the server writes to stderr is logged with its name, not sent to the model."""
    with structlog.testing.capture_logs() as logs:
        result = run(portal, servers, "mcp__t__stderr_noise", {"text": "MARKER-7f3a"})
        # The stderr line is read concurrently with the response: a round trip orders it.
        run(portal, servers, "mcp__t__stderr_noise", {"text": "MARKER-sync"})
    assert model_response("t", result) == {"output": "noise written"}
    assert "MARKER" not in json.dumps(result.display)
    lines = [entry for entry in logs if entry["event"] == "mcp.server_stderr"]
    assert {"server": "t", "line": "MARKER-7f3a"}.items() <= lines[0].items()


def test_a_server_sees_only_the_default_environment_and_its_env(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """The agent's secrets are not inherited; the entry's env is."""
    env = json.loads(model_response("t", run(portal, servers, "mcp__t__env"))["output"])
    assert SECRET not in env
    assert env["TOOLBATCH_TEST_GIVEN"] == "from-config"
    assert "PATH" in env
    assert set(env) <= {*DEFAULT_INHERITED_ENV_VARS, "TOOLBATCH_TEST_GIVEN"}
