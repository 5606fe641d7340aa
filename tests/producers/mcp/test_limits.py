"""What an MCP server may send is bounded (issue 14, items 1 and 2): a flood or a deeply
nested answer fails that call with a clear error, and the host and the server go on."""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal

from tests.producers.mcp._support import HttpServer, free_port, model_response, run, running
from toolbatch import (
    InlineDataPart,
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolScheduler,
    parts_adapter,
)
from toolbatch.producers.mcp import McpServers, load_mcp_config

HOSTILE = Path(__file__).resolve().parents[2] / "mcp_server" / "hostile.py"
LIMIT_BYTES = 4 * 2**20


class HostileServer(HttpServer):
    def start(self) -> None:
        legacy = ["--sse", "--flood-max-bytes", str(512 * 2**20)] if self.transport == "sse" else []
        self.process = subprocess.Popen(
            [sys.executable, str(HOSTILE), "--port", str(self.port), *legacy],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_listening()


@pytest.fixture(scope="module")
def servers(portal: BlockingPortal) -> Iterator[McpServers]:
    http = HostileServer(port=free_port())
    http.start()
    document = {
        "web": {"url": http.url},
        "pipe": {"command": sys.executable, "args": [str(HOSTILE), "--stdio"]},
    }
    try:
        with running(portal, document, max_message_bytes=LIMIT_BYTES) as started:
            yield started
    finally:
        http.stop()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize(
    ("tool", "fragment"),
    [
        pytest.param("flood_sse", "sent an event larger than 4,194,304 bytes", id="endless-sse"),
        pytest.param("flood_json", "passed 4,194,304 bytes and was cut off", id="endless-json"),
        pytest.param("gzip_bomb", "passed 4,194,304 bytes and was cut off", id="gzip-bomb"),
    ],
)
def test_an_endless_http_answer_fails_that_call_and_the_host_goes_on(
    portal: BlockingPortal, servers: McpServers, tool: str, fragment: str
) -> None:
    """The cap stops the read; the call's error names it; the next call works."""
    before = _peak_rss_bytes()
    flooded = run(portal, servers, f"mcp__web__{tool}", timeout_s=30)
    assert flooded.error is not None
    assert fragment in flooded.error.message
    assert "max_message_bytes" in flooded.error.message
    assert _peak_rss_bytes() - before < 200 * 2**20  # bounded, not gigabytes
    after = run(portal, servers, "mcp__web__echo", {"text": "still here"}, timeout_s=30)
    assert model_response("e", after) == {"output": "still here"}


@pytest.mark.parametrize("tool", ["deep", "unclosed"])
@pytest.mark.parametrize("server", ["web", "pipe"])
def test_a_deeply_nested_answer_is_an_error_for_that_call(
    portal: BlockingPortal, servers: McpServers, server: str, tool: str
) -> None:
    """5,000 levels over HTTP or stdio, closed or not (issue 29, item 5): a prompt error (no
    timeout wait) for that call, and the connection is not torn down: calls go on."""
    deep = run(portal, servers, f"mcp__{server}__{tool}", timeout_s=30)
    assert deep.error is not None
    assert deep.error.type != "timeout"
    assert "nested" in deep.error.message or "recursion" in deep.error.message
    after = run(portal, servers, f"mcp__{server}__echo", {"text": "fine"}, timeout_s=30)
    assert model_response("e", after) == {"output": "fine"}


async def test_text_an_mcp_server_labels_as_an_image_is_bounded_as_text(tmp_path: Path) -> None:
    """Issue 14, item 6: 2.4 MB of text labelled image/png under a budget of 1,000."""
    document = {
        "mcpServers": {"pipe": {"command": sys.executable, "args": [str(HOSTILE), "--stdio"]}}
    }
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts", mcp_servers=document, batch_budget=1_000
    )
    async with ToolScheduler(Registry(), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="m", name="mcp__pipe__fake_image")])
    assert not any(isinstance(part, InlineDataPart) for part in turn.parts)
    assert turn.content_length <= 1_000
    sent = parts_adapter.dump_json(list(turn.parts), by_alias=True)
    assert len(sent) < 4_000


class _EndlessSseEvent(BaseHTTPRequestHandler):
    """A legacy HTTP+SSE endpoint whose first event never ends."""

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = b"x" * 65_536
        try:
            self.wfile.write(b"event: endpoint\ndata: ")
            while True:
                self.wfile.write(chunk)
        except OSError:
            return  # the client hung up: the cap worked


async def test_an_endless_legacy_sse_event_is_cut_off_and_named(tmp_path: Path) -> None:
    """Legacy SSE is bounded by httpx2's own per-event cap (1 MiB): no unbounded growth."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessSseEvent)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{http.server_address[1]}/sse"
    document = {"mcpServers": {"old": {"type": "sse", "url": url}}}
    before = _peak_rss_bytes()
    try:
        async with McpServers(
            load_mcp_config(document), max_message_bytes=LIMIT_BYTES, start_timeout_s=20
        ) as servers:
            failure = servers.failures["old"]
    finally:
        http.shutdown()
        http.server_close()
    assert "byte limit" in str(failure), str(failure)
    assert _peak_rss_bytes() - before < 200 * 2**20


def test_a_legacy_sse_post_answered_with_an_endless_body_is_dropped_at_the_cap(
    portal: BlockingPortal,
) -> None:
    """Issue 29, item 7: the POST body (1.2 GB once) is read to the cap and dropped; the call
    gets no answer and times out, memory stays bounded and the session goes on."""
    http = HostileServer(port=free_port(), transport="sse")
    http.start()
    before = _peak_rss_bytes()
    document = {"old": {"type": "sse", "url": http.url}}
    try:
        with running(portal, document, max_message_bytes=LIMIT_BYTES) as servers:
            # 4 MiB arrive in milliseconds: the call waits out its timeout, so keep it short.
            flooded = run(portal, servers, "mcp__old__flood_json", timeout_s=2)
            assert flooded.error is not None
            assert _peak_rss_bytes() - before < 200 * 2**20
            after = run(portal, servers, "mcp__old__echo", {"text": "still here"}, timeout_s=30)
            assert model_response("e", after) == {"output": "still here"}
    finally:
        http.stop()
