"""Servers that crash, never start, stop answering or flood: clear errors, restarts, no hangs."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from anyio.from_thread import BlockingPortal

from tests.processes import alive
from tests.producers.mcp._support import (
    SHORT_WAITS,
    TEST_SERVER,
    call_tool,
    model_response,
    run,
    running,
    stdio_entry,
)
from toolbatch import ToolResult
from toolbatch.producers.mcp import McpServers

# Starts the test server unless the marker file (argv[1]) exists; then exits with 7.
GATED_SERVER = (
    "import os, runpy, sys\n"
    "if os.path.exists(sys.argv[1]):\n"
    "    sys.stderr.write('gate closed\\n')\n"
    "    sys.exit(7)\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def pid_of(portal: BlockingPortal, servers: McpServers, tool: str) -> int:
    return int(model_response(tool, run(portal, servers, tool))["output"])


@pytest.fixture(scope="module")
def servers(
    portal: BlockingPortal, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[McpServers]:
    """``crashy``: the test server; ``gated``: the same, unless its marker file exists.

    Messages over 2,000,000 bytes close a connection.
    """
    marker = tmp_path_factory.mktemp("gate") / "closed"
    document = {
        "crashy": stdio_entry(),
        "gated": {
            "command": sys.executable,
            "args": ["-c", GATED_SERVER, str(marker), str(TEST_SERVER)],
        },
    }
    with running(portal, document, max_message_bytes=2_000_000) as started:
        started.marker = marker  # type: ignore[attr-defined]
        yield started


def test_a_crash_mid_call_fails_every_call_in_flight_and_the_next_call_restarts(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Calls sharing the crashed session fail promptly, naming the exit code; the next calls
    share one fresh server process."""
    first_pid = pid_of(portal, servers, "mcp__crashy__pid")

    async def batch() -> list[ToolResult]:
        results: list[ToolResult] = []
        progressed = anyio.Event()

        async def slow() -> None:
            args = {"seconds": 30, "steps": 300}
            result = await call_tool(
                servers, "mcp__crashy__slow", args, progress=lambda _: progressed.set()
            )
            results.append(result)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(slow)
            await progressed.wait()  # the slow calls are running on the server
            results.append(await call_tool(servers, "mcp__crashy__crash", {"exit_code": 3}))
        return results

    started = time.monotonic()
    results = portal.call(batch)
    assert time.monotonic() - started < 10
    assert len(results) == 4
    for result in results:
        assert result.error is not None
        assert result.error.type == "mcp_server_crashed"
        assert "'crashy'" in result.error.message
        assert "exit code 3" in result.error.message
        assert "restarted on the next call" in result.error.message
        assert "crashing on purpose" not in result.error.message  # stderr is never output
        assert result.persisted_output_files == ()
    restarts = servers.connection("crashy").restarts

    async def after_the_crash() -> list[ToolResult]:
        results: list[ToolResult] = []

        async def one() -> None:
            results.append(await call_tool(servers, "mcp__crashy__pid"))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
        return results

    pids = {int(model_response("p", result)["output"]) for result in portal.call(after_the_crash)}
    assert len(pids) == 1  # five concurrent calls share one restart
    assert first_pid not in pids
    assert not alive(first_pid)
    assert servers.connection("crashy").restarts == restarts + 1


def test_a_failed_restart_is_reported_and_retried_after_a_pause(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """A server that will not come back fails calls fast, then restarts once it can."""
    marker: Path = servers.marker  # type: ignore[attr-defined]
    run(portal, servers, "mcp__gated__crash")
    marker.touch()
    try:
        refused = run(portal, servers, "mcp__gated__echo", {"text": "x"})
        assert refused.error is not None
        assert refused.error.type == "mcp_server_unavailable"
        assert "exit code 7" in refused.error.message
        assert "gate closed" in refused.error.message  # start-up stderr helps the user
        restarts = servers.connection("gated").restarts
        again = run(portal, servers, "mcp__gated__echo", {"text": "x"})
        assert servers.connection("gated").restarts == restarts  # no respawn in the back-off
        assert again.error is not None
        assert again.error.message == refused.error.message
    finally:
        marker.unlink()
    time.sleep(SHORT_WAITS["restart_backoff_s"])  # a duration: nothing to wait on
    back = run(portal, servers, "mcp__gated__echo", {"text": "open"})
    assert model_response("e", back) == {"output": "open"}


def test_servers_that_cannot_start_are_reported_and_the_others_work_until_exit(
    portal: BlockingPortal,
) -> None:
    """A missing command or an early exit is a failure with its reason; the rest serve calls,
    and leaving stops them with their whole process group (late calls get an error)."""
    document = {
        "good": stdio_entry(),
        "missing": {"command": "/nonexistent/toolbatch-server"},
        "exits": {
            "command": sys.executable,
            "args": ["-c", "import sys; sys.stderr.write('bad token\\n'); sys.exit(5)"],
        },
    }
    with running(portal, document) as servers:
        assert set(servers.failures) == {"missing", "exits"}
        assert "No such file or directory" in str(servers.failures["missing"])
        assert "exit code 5" in str(servers.failures["exits"])
        assert "bad token" in str(servers.failures["exits"])
        assert all(error.server == name for name, error in servers.failures.items())
        assert {p.declaration.name.split("__")[1] for p in servers.producers()} == {"good"}
        child = int(model_response("s", run(portal, servers, "mcp__good__spawn_child"))["output"])
        server_pid = servers.connection("good").pid
        assert server_pid is not None
        assert alive(child)
    after_exit = run(portal, servers, "mcp__good__echo", {"text": "late"})
    assert after_exit.error is not None
    assert "shut down" in after_exit.error.message
    assert not alive(server_pid)
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)  # the kernel reaps the killed orphan asynchronously
    assert not alive(child)


def test_a_server_that_never_answers_fails_its_start_up_without_hanging(
    portal: BlockingPortal,
) -> None:
    """Silence at start-up is cut off by start_timeout_s and reported."""
    document = {"mute": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}}
    started = time.monotonic()
    with running(portal, document, start_timeout_s=1) as servers:
        assert time.monotonic() - started < 8
        assert "within 1 s" in str(servers.failures["mute"])
        assert servers.producers() == []


def test_an_oversized_message_closes_the_connection_and_the_next_call_restarts(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """A result over max_message_bytes is refused with a clear error, never buffered."""
    result = run(portal, servers, "mcp__crashy__big_text", {"n_chars": 3_000_000})
    assert result.error is not None
    assert result.error.type == "mcp_server_crashed"
    assert "2,000,000-byte limit" in result.error.message
    small = run(portal, servers, "mcp__crashy__big_text", {"n_chars": 1_000})
    assert len(model_response("s", small)["output"]) == 1_000


# The test server, but it lingers for 30 s after its stdin closes instead of exiting.
LINGERING_SERVER = (
    "import os, runpy, sys, time\n"
    "os._exit = lambda code: time.sleep(30)\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_a_server_that_lingers_after_stdin_closes_gets_the_grace_then_is_terminated(
    portal: BlockingPortal,
) -> None:
    """Leaving closes stdin, waits ``stdin_close_grace_s`` for the server, then ends it."""
    grace_s = 0.4
    entry = {"command": sys.executable, "args": ["-c", LINGERING_SERVER, str(TEST_SERVER)]}
    with running(portal, {"slow": entry}, stdin_close_grace_s=grace_s) as servers:
        assert model_response("e", run(portal, servers, "mcp__slow__echo", {"text": "x"}))
        pid = servers.connection("slow").pid
        assert pid is not None
        started = time.monotonic()
    took = time.monotonic() - started
    assert not alive(pid)
    assert grace_s <= took < grace_s + 1.5
