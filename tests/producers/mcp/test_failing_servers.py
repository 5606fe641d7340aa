"""MCP servers that fail, through the scheduler: the model is told which server and why,
never "unknown tool"; start-up timeouts are configurable; tools are re-listed."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.producers.mcp._support import SHORT_WAITS, TEST_SERVER, free_port, model_response
from toolbatch import (
    SchedulerConfig,
    ToolCall,
    ToolResult,
    ToolScheduler,
    Turn,
    default_registry,
)
from toolbatch._core._wire import FunctionResponsePart
from toolbatch.errors import ConfigError
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import McpServers, load_mcp_config

GOOD = {"command": sys.executable, "args": [str(TEST_SERVER)]}
MUTE = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}


def answer(turn: Turn, index: int = 0) -> dict[str, Any]:
    part = turn.responses[index].parts[0]
    assert isinstance(part, FunctionResponsePart)
    return dict(part.function_response.response)


async def one_call(tmp_path: Path, servers: dict[str, Any], call: ToolCall, **config: Any) -> Turn:
    options = {"mcp_servers": {"mcpServers": servers}, "artifacts_dir": tmp_path, **config}
    async with ToolScheduler(default_registry(), SchedulerConfig(**options)) as scheduler:
        return await scheduler.run_batch([call])


async def test_a_server_that_exits_at_start_is_named_with_its_exit_code_and_stderr(
    tmp_path: Path,
) -> None:
    """Not "unknown tool", not "stopped reading its stdin": the exit code and stderr tail."""
    dead = {"command": "sh", "args": ["-c", "echo 'bad token for dead' >&2; exit 3"]}
    turn = await one_call(
        tmp_path, {"dead": dead, "good": GOOD}, ToolCall(id="c", name="mcp__dead__echo")
    )
    response = turn.responses[0]
    assert response.error_type == "mcp_server_unavailable"
    error = answer(turn)["error"]
    assert "MCP server 'dead' exited during start-up with exit code 3" in error
    assert "bad token for dead" in error
    assert "unknown tool" not in error
    assert "stdin" not in error


@pytest.mark.parametrize(
    ("entry", "config", "env", "limit"),
    [
        pytest.param({"startup_timeout_sec": 0.5}, {}, None, "0.5 s", id="per-server"),
        pytest.param({}, {"mcp_startup_timeout": 0.6}, None, "0.6 s", id="scheduler-config"),
        pytest.param({}, {}, "700", "0.7 s", id="MCP_TIMEOUT-ms"),
        pytest.param({}, {"mcp_startup_timeout": 0.6}, "90000", "0.6 s", id="config-beats-env"),
        pytest.param(
            {"startup_timeout_sec": 0.5},
            {"mcp_startup_timeout": 9},
            None,
            "0.5 s",
            id="server-beats-config",
        ),
    ],
)
async def test_the_start_up_timeout_is_configurable_everywhere(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    entry: dict[str, Any],
    config: dict[str, Any],
    env: str | None,
    limit: str,
) -> None:
    """startup_timeout_sec, SchedulerConfig(mcp_startup_timeout=), MCP_TIMEOUT (ms)."""
    if env is None:
        monkeypatch.delenv("MCP_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("MCP_TIMEOUT", env)
    started = time.monotonic()
    turn = await one_call(
        tmp_path, {"mute": {**MUTE, **entry}}, ToolCall(id="c", name="mcp__mute__echo"), **config
    )
    assert time.monotonic() - started < 15
    error = answer(turn)["error"]
    assert (
        f"MCP server 'mute' did not finish start-up (initialize and tools/list) within {limit}"
        in error
    )
    assert "startup_timeout_sec" in error
    assert "MCP_TIMEOUT" in error


async def test_a_server_that_never_started_is_killed_at_once(tmp_path: Path) -> None:
    """A server that did not finish start-up gets no 2 s grace to exit on its own (and
    then 2 s more after SIGTERM): the whole run takes its start-up timeout, little more."""
    started = time.monotonic()
    turn = await one_call(
        tmp_path,
        {"mute": {**MUTE, "startup_timeout_sec": 0.5}},
        ToolCall(id="c", name="mcp__mute__echo"),
    )
    assert time.monotonic() - started < 1.9
    assert "did not finish start-up" in answer(turn)["error"]


def test_a_bad_mcp_timeout_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """MCP_TIMEOUT that is not a number of milliseconds names itself and the fix."""
    monkeypatch.setenv("MCP_TIMEOUT", "30s")
    with pytest.raises(ConfigError, match="MCP_TIMEOUT must be a positive number of milliseconds"):
        McpServers(load_mcp_config({"mcpServers": {}}))


async def test_connection_refused_is_said(tmp_path: Path) -> None:
    """An HTTP server nobody listens for: "connection refused", for each transport."""
    for entry in (
        {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
        {"type": "sse", "url": f"http://127.0.0.1:{free_port()}/sse"},
        {"url": f"http://127.0.0.1:{free_port()}/mcp"},
    ):
        turn = await one_call(tmp_path, {"web": entry}, ToolCall(id="c", name="mcp__web__x"))
        error = answer(turn)["error"]
        assert "MCP server 'web' at " in error
        assert "connection refused" in error


async def test_disabled_filtered_task_only_and_missing_tools_each_say_why(
    tmp_path: Path,
) -> None:
    """A disabled server, an excluded tool, a task-only tool, a tool the server lacks."""
    servers = {
        "off": {**GOOD, "disabled": True},
        "t": {**GOOD, "excludeTools": ["pid"]},
    }
    calls = [
        ToolCall(id="off", name="mcp__off__echo", args={"text": "x"}),
        ToolCall(id="pid", name="mcp__t__pid"),
        ToolCall(id="task", name="mcp__t__task_only"),
        ToolCall(id="none", name="mcp__t__no_such_tool"),
        ToolCall(id="ok", name="mcp__t__echo", args={"text": "fine"}),
    ]
    config = SchedulerConfig(mcp_servers={"mcpServers": servers}, artifacts_dir=tmp_path)
    async with ToolScheduler(default_registry(), config) as scheduler:
        names = {d.name for d in await scheduler.wait_for_tools()}
        turn = await scheduler.run_batch(calls)
    assert "mcp__t__task_only" not in names  # never offered: toolbatch has no MCP tasks
    assert "mcp__t__pid" not in names
    errors = [answer(turn, i).get("error", "") for i in range(4)]
    assert "'off' is disabled in the MCP config" in errors[0]
    assert "includeTools/excludeTools leave it out" in errors[1]
    assert "execution.taskSupport is 'required'" in errors[2]
    assert "offers no tool 'mcp__t__no_such_tool'" in errors[3]
    assert answer(turn, 4) == {"output": "fine"}


async def wait_for_tool(scheduler: ToolScheduler, name: str, *, present: bool = True) -> None:
    """The re-list runs in the connection's own task: wait for the tools to change."""
    servers = scheduler.mcp_servers
    with anyio.fail_after(10):
        while True:
            version = servers.tools_version
            if (name in {d.name for d in scheduler.declarations()}) is present:
                return
            await servers.tools_changed(after=version)


async def test_tools_are_relisted_on_list_changed_and_after_a_restart(tmp_path: Path) -> None:
    """notifications/tools/list_changed adds the new tool; a restarted server is listed anew."""
    config = SchedulerConfig(mcp_servers={"mcpServers": {"t": GOOD}}, artifacts_dir=tmp_path)
    async with ToolScheduler(default_registry(), config) as scheduler:
        added = await scheduler.run_batch(
            [ToolCall(id="a", name="mcp__t__add_tool", args={"name": "fresh"})]
        )
        assert answer(added) == {"output": "added fresh"}
        await wait_for_tool(scheduler, "mcp__t__fresh")
        fresh = await scheduler.run_batch([ToolCall(id="f", name="mcp__t__fresh")])
        assert answer(fresh) == {"output": "fresh here"}
        await scheduler.run_batch([ToolCall(id="x", name="mcp__t__crash")])
        again = await scheduler.run_batch(
            [ToolCall(id="e", name="mcp__t__echo", args={"text": "back"})]
        )
        assert answer(again) == {"output": "back"}  # restarted...
        await wait_for_tool(scheduler, "mcp__t__fresh", present=False)  # ...and listed anew
        gone = await scheduler.run_batch([ToolCall(id="g", name="mcp__t__fresh")])
        assert "offers no tool 'mcp__t__fresh'" in answer(gone)["error"]


async def test_a_server_that_failed_to_start_is_tried_again_by_a_later_call(
    tmp_path: Path,
) -> None:
    """A server that could not start (a missing file, say) comes up on a later call once it
    can, after the restart back-off, and its tools run."""
    gate = tmp_path / "gate-open"
    script = f"import os, sys; os.path.exists({str(gate)!r}) or sys.exit(4); " + (
        f"sys.argv = ['server']; exec(open({str(TEST_SERVER)!r}).read())"
    )
    document = {"mcpServers": {"gated": {"command": sys.executable, "args": ["-c", script]}}}
    call = ToolCall(id="c", name="mcp__gated__echo", args={"text": "hello"})
    # What ToolScheduler opens (wait_for_start=False, calls looked up by name), with a short
    # back-off instead of the default 2 s.
    servers = McpServers(load_mcp_config(document), wait_for_start=False, **SHORT_WAITS)
    async with servers:
        await servers.wait_started()
        first = await run_looked_up(servers, call)
        assert first.error is not None
        assert "exited during start-up with exit code 4" in first.error.message
        gate.touch()
        await anyio.sleep(SHORT_WAITS["restart_backoff_s"])  # a duration: nothing to wait on
        second = await run_looked_up(servers, call)
        assert model_response("e", second) == {"output": "hello"}
        assert "mcp__gated__echo" in {p.declaration.name for p in servers.producers()}


async def run_looked_up(servers: McpServers, call: ToolCall) -> ToolResult:
    """Run ``call`` through whatever ``servers.lookup`` answers, as the scheduler does."""
    producer = servers.lookup(call.name)
    assert producer is not None
    return await producer.run(call, ProducerContext())


@pytest.mark.parametrize("option", ["restart_backoff_s", "stdin_close_grace_s"])
@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "2", True])
def test_a_bad_wait_is_a_config_error_naming_it(option: str, value: object) -> None:
    """The back-off and the grace take seconds, 0 or more; anything else names the fix."""
    with pytest.raises(ConfigError, match=f"{option} must be a finite number of seconds") as e:
        McpServers(load_mcp_config({"mcpServers": {}}), **{option: value})
    assert repr(value) in str(e.value)
