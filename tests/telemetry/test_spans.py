"""The spans of a batch: one turn span under the caller's span, a call span per response,
and spans for its persistence and its hooks, with the conventions' attributes."""

from __future__ import annotations

import gc
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tests.telemetry._support import Recorded, attributes, parent_of
from toolbatch import (
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    default_registry,
    tool,
)
from toolbatch.hooks import CommandHook, PostToolBatchInput, PostToolBatchOutput

TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"
MCP_CONFIG = {"mcpServers": {"test": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode() -> str:
    """Fail."""
    raise RuntimeError("boom")


@tool(timeout_s=0.3)
async def hang() -> str:
    """Wait for ever (stopped by its 0.3 s timeout)."""
    await anyio.Event().wait()
    return "never"


@tool(output_threshold=None)
def report(n: int) -> str:
    """Return ``n`` characters of report lines."""
    line = "report line with some words in it\n"
    return (line * (n // len(line) + 1))[:n]


async def remind(batch: PostToolBatchInput) -> PostToolBatchOutput:
    return PostToolBatchOutput(additional_context="remember to run the tests")


def _registry() -> Registry:
    registry = default_registry()
    for function in (add, explode, hang, report):
        registry.register(function)
    return registry


async def test_a_batch_is_a_turn_span_under_the_callers_span(
    otel: Recorded, tmp_path: Path
) -> None:
    """Success, error, timeout, cut and persisted output, a hook and MCP calls: one tree."""
    config = SchedulerConfig(
        batch_budget=6_000,
        artifacts_dir=tmp_path / "artifacts",
        hooks=[remind],
        mcp_servers=MCP_CONFIG,
        session_id="session-7",
    )
    calls = [
        ToolCall(id="ok", name="add", args={"a": 2, "b": 3}),
        ToolCall(id="boom", name="explode"),
        ToolCall(id="slow", name="hang"),
        ToolCall(id="seq", name="run_shell_command", args={"command": "seq 1 100000"}),
        ToolCall(id="report", name="report", args={"n": 20_000}),
        ToolCall(id="mcp", name="mcp__test__echo", args={"text": "hello"}),
        ToolCall(id="mcp-fail", name="mcp__test__fail", args={"message": "no such file"}),
        ToolCall(id="ghost", name="no_such_tool"),
    ]
    async with ToolScheduler(_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent coder") as agent:
            turn = await scheduler.run_batch(calls)

    by_id = {response.call_id: response for response in turn.responses}
    turn_span = otel.one("toolbatch.turn")
    assert parent_of(turn_span) == agent.get_span_context().span_id
    assert turn_span.context.trace_id == agent.get_span_context().trace_id
    assert turn_span.kind is SpanKind.INTERNAL

    spans = otel.call_spans()
    assert set(spans) == {call.id for call in calls}
    for call in calls:
        span = spans[call.id]
        assert span.name == f"execute_tool {call.name}"
        assert span.kind is SpanKind.INTERNAL
        assert parent_of(span) == turn_span.context.span_id
        assert attributes(span)["gen_ai.operation.name"] == "execute_tool"
        assert attributes(span)["gen_ai.tool.name"] == call.name
        assert attributes(span)["gen_ai.tool.call.id"] == call.id
        assert attributes(span)["toolbatch.call.chars"] >= 0

    def status(call_id: str) -> str:
        return str(attributes(spans[call_id])["toolbatch.call.status"])

    assert status("ok") == "success"
    assert "error.type" not in attributes(spans["ok"])
    assert spans["ok"].status.status_code is StatusCode.UNSET
    assert attributes(spans["ok"])["gen_ai.tool.type"] == "function"
    assert status("boom") == "error"
    assert attributes(spans["boom"])["error.type"] == by_id["boom"].error_type
    assert spans["boom"].status.status_code is StatusCode.ERROR
    assert spans["boom"].status.description is None  # no message: it may hold content
    assert status("slow") == "timed_out"
    assert attributes(spans["slow"])["error.type"] == "timeout"
    slow = spans["slow"]
    assert (slow.end_time or 0) - (slow.start_time or 0) >= 0.3e9
    assert status("ghost") == "error"
    assert attributes(spans["ghost"])["error.type"] == "unknown_tool"

    # The shell streamed its output to an artifact while it ran: a persist span under its
    # call span. The finalizer persisted the report when it cut it: under the turn span, and
    # the call span tells that final state, not the producer's.
    assert attributes(spans["seq"])["toolbatch.call.persisted"] is True
    (stream,) = [
        span for span in otel.children(spans["seq"]) if span.name == "toolbatch.artifact.persist"
    ]
    assert attributes(stream)["toolbatch.artifact.streamed"] is True
    assert attributes(stream)["toolbatch.artifact.bytes"] == len(
        "".join(f"{i}\n" for i in range(1, 100_001))
    )
    assert attributes(stream)["toolbatch.artifact.location"] == "primary"
    assert attributes(spans["report"])["toolbatch.call.persisted"] is True
    assert by_id["report"].persisted_output_files
    (written,) = [
        span for span in otel.children(turn_span) if span.name == "toolbatch.artifact.persist"
    ]
    assert attributes(written)["toolbatch.artifact.bytes"] >= 20_000
    assert attributes(written)["toolbatch.artifact.kind"] == "text"
    assert attributes(written)["toolbatch.artifact.reused"] is False

    # MCP: the MCP attributes on the execute_tool span (the conventions' enrichment).
    mcp = attributes(spans["mcp"])
    assert mcp["mcp.method.name"] == "tools/call"
    assert mcp["network.transport"] == "pipe"
    assert mcp["toolbatch.mcp.server"] == "test"
    assert mcp["toolbatch.mcp.tool"] == "echo"
    assert mcp["gen_ai.tool.type"] == "extension"
    assert str(mcp["mcp.protocol.version"])[:2] == "20"  # a dated MCP version
    assert "mcp.session.id" not in mcp  # stdio has no session id
    assert status("mcp") == "success"
    assert attributes(spans["mcp-fail"])["error.type"] == "tool_error"
    assert status("mcp-fail") == "error"

    (hook,) = otel.named("toolbatch.hook PostToolBatch")
    assert parent_of(hook) == turn_span.context.span_id
    assert attributes(hook) == {
        "toolbatch.hook.event": "PostToolBatch",
        "toolbatch.hook.name": "remind",
        "toolbatch.hook.type": "python",
        "toolbatch.hook.outcome": "context",
    }

    summary = attributes(turn_span)
    assert summary["toolbatch.turn.budget"] == 6_000
    assert summary["toolbatch.turn.chars"] == turn.content_length <= 6_000
    assert summary["toolbatch.turn.calls"] == len(calls)
    assert summary["toolbatch.turn.errors"] == 4
    assert summary["toolbatch.turn.slots_cut"] >= 2
    assert summary["toolbatch.turn.responses_cut"] >= 2
    assert summary["toolbatch.turn.artifacts.persisted"] == 2
    assert summary["toolbatch.turn.artifacts.bytes"] == sum(
        attributes(span)["toolbatch.artifact.bytes"] for span in (stream, written)
    )
    assert summary["toolbatch.turn.artifacts.failed"] == 0
    assert summary["toolbatch.turn.hooks.run"] == 1
    assert summary["toolbatch.turn.hooks.context"] == 1
    assert summary["toolbatch.turn.hooks.failed"] == 0
    assert summary["toolbatch.turn.stopped"] is False
    assert summary["toolbatch.turn.completed"] is True
    assert summary["gen_ai.conversation.id"] == "session-7"
    # Nothing is left open: every span of the tree was exported.
    assert {span.context.trace_id for span in otel.spans()} == {turn_span.context.trace_id}


async def test_execute_then_complete_turn_is_one_turn(otel: Recorded, tmp_path: Path) -> None:
    """A runtime that executes, merges its own answers and completes gets one turn span."""
    config = SchedulerConfig(artifacts_dir=tmp_path)
    async with ToolScheduler(_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent") as agent:
            executed = await scheduler.execute(
                [ToolCall(id="a", name="add", args={"a": 1, "b": 1}, ordinal=0)]
            )
            skipped = ToolCallResponse.failed(
                ToolCall(id="b", name="add", args={"a": 2, "b": 2}, ordinal=1),
                "skipped: at most 1 tool call runs per turn",
                status="skipped",
                error_type="skipped",
            )
            executed.add(skipped, ordinal=1)
            turn = await scheduler.complete_turn(executed)
    assert [r.call_id for r in turn.responses] == ["a", "b"]
    turn_span = otel.one("toolbatch.turn")
    assert parent_of(turn_span) == agent.get_span_context().span_id
    spans = otel.call_spans()
    assert set(spans) == {"a", "b"}
    assert all(parent_of(span) == turn_span.context.span_id for span in spans.values())
    assert attributes(spans["a"])["toolbatch.call.status"] == "success"
    assert attributes(spans["b"])["toolbatch.call.status"] == "skipped"
    assert attributes(spans["b"])["error.type"] == "skipped"
    assert spans["b"].start_time == spans["b"].end_time  # answered by the runtime, not run
    assert attributes(turn_span)["toolbatch.turn.calls"] == 2
    assert attributes(turn_span)["toolbatch.turn.completed"] is True


async def test_a_turn_the_runtime_answered_alone_still_has_its_spans(
    otel: Recorded, tmp_path: Path
) -> None:
    """``complete_turn`` without ``execute`` (every call answered in place) starts the turn."""
    async with ToolScheduler(_registry(), SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        duplicate = ToolCallResponse.failed(
            ToolCall(id="again", name="add"),
            "duplicate tool call id 'again'",
            status="duplicate",
            error_type="duplicate_call",
        )
        await scheduler.complete_turn([duplicate])
    turn_span = otel.one("toolbatch.turn")
    assert turn_span.parent is None  # nothing was current: a root span
    (span,) = otel.call_spans().values()
    assert parent_of(span) == turn_span.context.span_id
    assert attributes(span)["toolbatch.call.status"] == "duplicate"


async def test_denied_duplicate_and_cancelled_calls_are_told_apart(
    otel: Recorded, tmp_path: Path
) -> None:
    """Each status the issue names is an attribute value of its own."""
    abort = anyio.Event()

    @tool(needs_permission=True)
    def delete_everything() -> str:
        """Needs permission."""
        return "deleted"

    @tool
    async def stop_the_batch() -> str:
        """Abort the batch it runs in, then wait to be cancelled."""
        abort.set()
        await anyio.Event().wait()
        return "never"

    async def refuse(call: ToolCall, declaration: object) -> bool:
        return False

    registry = Registry([add, delete_everything, stop_the_batch])
    config = SchedulerConfig(artifacts_dir=tmp_path, concurrency=1)  # in order: abort last
    async with ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch(
            [
                ToolCall(id="same", name="add", args={"a": 1, "b": 2}),
                ToolCall(id="same", name="add", args={"a": 1, "b": 2}),
                ToolCall(id="rm", name="delete_everything"),
                ToolCall(id="stop", name="stop_the_batch"),
            ],
            abort=abort,
            approve=refuse,
        )
    assert [r.status for r in turn.responses] == ["success", "duplicate", "error", "cancelled"]
    statuses = sorted(
        str(attributes(span)["toolbatch.call.status"])
        for span in otel.spans()
        if span.name.startswith("execute_tool ")
    )
    assert statuses == ["cancelled", "denied", "duplicate", "success"]
    (denied,) = [s for s in otel.spans() if attributes(s).get("toolbatch.call.status") == "denied"]
    assert attributes(denied)["error.type"] == "permission_denied"
    (cancelled,) = otel.named("execute_tool stop_the_batch")
    assert attributes(cancelled)["error.type"] == "cancelled"


async def test_a_failing_hook_is_a_failed_hook_span(otel: Recorded, tmp_path: Path) -> None:
    """A hook that crashes is logged and ignored; its span says it failed, and why."""

    async def crash(batch: PostToolBatchInput) -> PostToolBatchOutput:
        raise ValueError("hook bug")

    config = SchedulerConfig(artifacts_dir=tmp_path, hooks=[crash])
    async with ToolScheduler(_registry(), config) as scheduler:
        await scheduler.run_batch([ToolCall(id="a", name="add", args={"a": 1, "b": 2})])
    (hook,) = otel.named("toolbatch.hook PostToolBatch")
    assert attributes(hook)["toolbatch.hook.outcome"] == "failed"
    assert attributes(hook)["error.type"] == "ValueError"
    assert hook.status.status_code is StatusCode.ERROR
    assert attributes(otel.one("toolbatch.turn"))["toolbatch.turn.hooks.failed"] == 1


@pytest.fixture
def http_server() -> Iterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(TEST_SERVER), "--http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the HTTP test server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP test server did not listen"
                time.sleep(0.05)  # polling a port: there is no event to wait on
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(timeout=10)


async def test_an_http_mcp_call_names_its_server_and_session(
    otel: Recorded, tmp_path: Path, http_server: str
) -> None:
    """Streamable HTTP: ``tcp``, the server's address and port, the MCP session id."""
    config = SchedulerConfig(
        artifacts_dir=tmp_path, mcp_servers={"mcpServers": {"web": {"url": http_server}}}
    )
    async with ToolScheduler(_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent"):
            turn = await scheduler.run_batch([ToolCall(id="m", name="mcp__web__meta")])
    span = otel.call_spans()["m"]
    mcp = attributes(span)
    assert mcp["network.transport"] == "tcp"
    assert mcp["server.address"] == "127.0.0.1"
    assert mcp["server.port"] == int(http_server.split(":")[2].split("/")[0])
    assert len(str(mcp["mcp.session.id"])) >= 8
    meta = json.loads(turn.responses[0].parts[0].function_response.response["output"])  # type: ignore[union-attr]
    assert meta["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"


async def test_a_turn_never_completed_is_ended_as_such(otel: Recorded, tmp_path: Path) -> None:
    """Executed, then dropped without a completion: ended, dated when execute returned."""
    async with ToolScheduler(_registry(), SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        pending = await scheduler.execute([ToolCall(id="c0", name="add", args={"a": 1, "b": 1})])
        assert otel.named("toolbatch.turn") == []  # still pending: its span is open
        del pending
        gc.collect()
        (ended,) = otel.named("toolbatch.turn")
    assert attributes(ended)["toolbatch.turn.completed"] is False
    (call,) = otel.children(ended)
    assert attributes(call)["gen_ai.tool.call.id"] == "c0"
    assert (ended.end_time or 0) >= (call.end_time or 0)


async def test_model_chosen_strings_and_hook_commands_stay_out_of_telemetry(
    otel: Recorded, tmp_path: Path
) -> None:
    """A 1 MB call id or tool name is a short attribute, invented tool names share one
    metric series (``_OTHER``), and a command hook's command line (a bearer token in it)
    is never exported, even with content capture off."""
    secret = "Authorization: Bearer sk-live-0123456789"
    hook = CommandHook(["sh", "-c", f"echo '{secret}' >/dev/null"])
    config = SchedulerConfig(artifacts_dir=tmp_path, hooks=[hook])
    calls = [ToolCall(id="i" * 1_000_000, name="add", args={"a": 1, "b": 2})]
    calls += [ToolCall(id=f"c{n}", name=f"invented_{n}" + "n" * 1_000_000) for n in range(3)]
    calls += [ToolCall(id=f"d{n}", name=f"made_up_{n}") for n in range(40)]
    async with ToolScheduler(_registry(), config) as scheduler:
        await scheduler.run_batch(calls)

    for span in otel.spans():
        assert len(span.name) <= 300
        for key, value in attributes(span).items():
            assert len(str(value)) <= 256, key
            assert "Bearer" not in str(value)
    (hook_span,) = otel.named("toolbatch.hook PostToolBatch")
    assert str(attributes(hook_span)["toolbatch.hook.name"]).startswith("command-")
    names = {
        point.attributes["gen_ai.tool.name"]
        for point in otel.points("gen_ai.execute_tool.duration")
    }
    assert names == {"add", "_OTHER"}
