"""The test server over streamable HTTP: headers, large results, a server that goes away."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal

from tests.producers.mcp._support import (
    SHORT_WAITS,
    HttpServer,
    free_port,
    model_response,
    run,
    running,
)
from toolbatch import ArtifactStore, InlineDataPart
from toolbatch.producers.mcp import McpServers

START_WAIT_S = 60.0


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer(port=free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def servers(portal: BlockingPortal, http_server: HttpServer) -> Iterator[McpServers]:
    document = {
        "web": {"url": http_server.url, "headers": {"X-Toolbatch-Test": "header-value"}},
        "down": {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
    }
    with running(portal, document) as started:
        yield started


def test_tools_are_discovered_and_called_over_http(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Discovery, a plain call and media work the same as on stdio."""
    names = {producer.declaration.name for producer in servers.producers()}
    assert {"mcp__web__echo", "mcp__web__image", "mcp__web__header"} <= names
    echo = run(portal, servers, "mcp__web__echo", {"text": "over http"})
    assert model_response("e", echo) == {"output": "over http"}
    image = run(portal, servers, "mcp__web__image", {"width": 2, "height": 2})
    assert isinstance(image.content, list)
    [png] = [part for part in image.content if isinstance(part, InlineDataPart)]
    assert base64.b64decode(png.inline_data.data).startswith(b"\x89PNG")


def test_configured_headers_are_sent(portal: BlockingPortal, servers: McpServers) -> None:
    """The entry's headers reach the server with every request."""
    result = run(portal, servers, "mcp__web__header", {"name": "x-toolbatch-test"})
    assert model_response("h", result) == {"output": "header-value"}


def test_an_unreachable_server_is_a_start_up_failure(servers: McpServers) -> None:
    """Nothing listening: the server is reported, with its URL, and exposes no tools."""
    assert set(servers.failures) == {"down"}
    assert "could not be reached" in str(servers.failures["down"])
    assert not [p for p in servers.producers() if p.declaration.name.startswith("mcp__down__")]


def test_a_large_result_over_http_is_persisted(
    portal: BlockingPortal, servers: McpServers, tmp_path: Path
) -> None:
    """A result far over one SSE event's default limit arrives whole and is persisted."""
    store = ArtifactStore(tmp_path)
    result = run(portal, servers, "mcp__web__big_text", {"n_chars": 3_000_000}, store=store)
    [path] = result.persisted_output_files or ()
    assert len(path.read_text()) == 3_000_000
    assert str(path) in model_response("b", result)["output"]


def test_a_server_that_goes_away_fails_the_call_and_is_reconnected_later(
    portal: BlockingPortal, servers: McpServers, http_server: HttpServer
) -> None:
    """Killed server: a clear error; once it listens again, the next call reconnects."""
    http_server.stop()
    lost = run(portal, servers, "mcp__web__echo", {"text": "anyone?"}, timeout_s=20)
    assert lost.error is not None
    assert lost.error.type in {"mcp_server_crashed", "mcp_server_unavailable"}
    assert "'web'" in lost.error.message
    http_server.start()
    # If the lost call already tried to reconnect (and failed), calls within the back-off
    # get that failure; the back-off is a duration, so it is waited out.
    time.sleep(SHORT_WAITS["restart_backoff_s"])
    back = run(portal, servers, "mcp__web__echo", {"text": "reconnected"}, timeout_s=20)
    assert model_response("e", back) == {"output": "reconnected"}
