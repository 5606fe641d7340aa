"""Helpers for tests against real MCP servers.

Servers are shared per test module, but pytest-asyncio runs a fixture's setup and teardown
in different tasks, and anyio scopes (``McpServers`` holds a task group) must be left by
the task that entered them. So ``McpServers`` lives on an event loop in a blocking portal
thread, entered and left by one task, and tests call into it with ``portal.call``.
"""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal

from toolbatch import ArtifactStore, FunctionResponsePart, ToolCall, ToolCallResponse, ToolResult
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import McpServers, load_mcp_config

TEST_SERVER = Path(__file__).resolve().parents[2] / "mcp_server" / "server.py"
START_WAIT_S = 60.0
SHORT_WAITS: dict[str, float] = {"restart_backoff_s": 0.5, "stdin_close_grace_s": 0.3}
"""The restart back-off and stdin-close grace the tests run with (the defaults are 2 s each)."""


def stdio_entry(**extra: Any) -> dict[str, Any]:
    """An mcpServers entry that starts the test server on stdio."""
    return {"command": sys.executable, "args": [str(TEST_SERVER)], **extra}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def running(
    portal: BlockingPortal, servers: dict[str, Any], **options: Any
) -> Iterator[McpServers]:
    """``McpServers`` for ``{"mcpServers": servers}``, entered on the portal's loop, with
    ``SHORT_WAITS`` unless ``options`` say otherwise."""
    manager = McpServers(load_mcp_config({"mcpServers": servers}), **{**SHORT_WAITS, **options})
    with portal.wrap_async_context_manager(manager) as entered:
        yield entered


async def call_tool(
    servers: McpServers,
    tool: str,
    args: dict[str, Any] | None = None,
    *,
    call_id: str = "call-1",
    store: ArtifactStore | None = None,
    timeout_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> ToolResult:
    """Run one call through the producer exposed as ``tool`` (on the servers' loop)."""
    call = ToolCall(id=call_id, name=tool, args=args or {})
    context = ProducerContext(store=store, timeout_s=timeout_s)
    if progress is not None:
        context.progress = progress
    return await servers.producer(tool).run(call, context)


def run(
    portal: BlockingPortal,
    servers: McpServers,
    tool: str,
    args: dict[str, Any] | None = None,
    **options: Any,
) -> ToolResult:
    """``call_tool`` from a test thread."""
    return portal.call(functools.partial(call_tool, servers, tool, args, **options))


def model_response(tool: str, result: ToolResult, call_id: str = "call-1") -> dict[str, Any]:
    """What the model receives for ``result``: the function response's body."""
    response = ToolCallResponse.from_result(ToolCall(id=call_id, name=tool), result)
    part = response.parts[0]
    assert isinstance(part, FunctionResponsePart)
    return dict(part.function_response.response)


@dataclass
class HttpServer:
    """A real test server process listening on 127.0.0.1:port."""

    port: int
    process: subprocess.Popen[bytes] | None = None
    transport: str = "http"
    """``http`` (streamable HTTP at /mcp) or ``sse`` (legacy HTTP+SSE at /sse)."""

    @property
    def url(self) -> str:
        path = "sse" if self.transport == "sse" else "mcp"
        return f"http://127.0.0.1:{self.port}/{path}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TEST_SERVER), f"--{self.transport}", "--port", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._wait_listening()

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the test server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)  # polling a port: there is no event to wait on
        raise RuntimeError(f"the HTTP test server did not listen within {START_WAIT_S} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
