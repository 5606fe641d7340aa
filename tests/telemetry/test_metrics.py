"""The metrics: call duration by tool and status, characters produced and sent, artifacts
and bytes written, hook duration, MCP request duration."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.telemetry._support import Recorded, point_for
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool
from toolbatch.hooks import PostToolBatchInput, PostToolBatchOutput

TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"


@tool(output_threshold=None)
def words(n: int) -> str:
    """``n`` characters of words."""
    return ("lorem ipsum dolor sit amet " * (n // 27 + 1))[:n]


@tool
def broken() -> str:
    """Fail."""
    raise OSError("disk on fire")


async def stop(batch: PostToolBatchInput) -> PostToolBatchOutput:
    return PostToolBatchOutput(stop=True, stop_reason="enough for today")


async def test_one_batch_shows_in_every_metric(otel: Recorded, tmp_path: Path) -> None:
    """Each metric has the batch's points, with the conventions' attributes."""
    servers = {"mcpServers": {"test": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}
    config = SchedulerConfig(
        batch_budget=3_000,
        artifacts_dir=tmp_path,
        hooks=[stop],
        mcp_servers=servers,
    )
    async with ToolScheduler(Registry([words, broken]), config) as scheduler:
        turn = await scheduler.run_batch(
            [
                ToolCall(id="w1", name="words", args={"n": 10_000}),
                ToolCall(id="w2", name="words", args={"n": 100}),
                ToolCall(id="x", name="broken"),
                ToolCall(id="e", name="mcp__test__echo", args={"text": "hi"}),
                ToolCall(id="f", name="mcp__test__fail", args={"message": "nope"}),
            ]
        )
    assert turn.stop_reason == "enough for today"
    sent_by_call = {r.call_id: r.content_length for r in turn.responses}

    durations = otel.points("gen_ai.execute_tool.duration")
    ok = point_for(durations, gen_ai__tool__name="words", toolbatch__call__status="success")
    assert ok.count == 2
    assert ok.attributes["gen_ai.tool.type"] == "function"
    assert "error.type" not in ok.attributes
    failed = point_for(durations, gen_ai__tool__name="broken")
    assert failed.attributes["toolbatch.call.status"] == "error"
    assert failed.attributes["error.type"] == turn.responses[2].error_type
    mcp_failed = point_for(durations, gen_ai__tool__name="mcp__test__fail")
    assert mcp_failed.attributes["error.type"] == "tool_error"
    assert mcp_failed.attributes["gen_ai.tool.type"] == "extension"
    call_spans = otel.call_spans()
    span_seconds = sum(
        ((call_spans[i].end_time or 0) - (call_spans[i].start_time or 0)) / 1e9
        for i in ("w1", "w2")
    )
    assert abs(ok.value - span_seconds) < 1e-6  # [GENAI-METRICS]: the span's duration

    produced = point_for(otel.points("toolbatch.tool.output.produced"), gen_ai__tool__name="words")
    assert produced.value == 10_100
    sent = point_for(otel.points("toolbatch.tool.output.sent"), gen_ai__tool__name="words")
    assert sent.value == sent_by_call["w1"] + sent_by_call["w2"] < 3_000

    (persisted,) = otel.points("toolbatch.artifacts.persisted")
    assert persisted.value == 1
    assert persisted.attributes == {
        "toolbatch.artifact.kind": "text",
        "toolbatch.artifact.location": "primary",
    }
    (written,) = otel.points("toolbatch.artifacts.written")
    assert written.value >= 10_000

    (hook,) = otel.points("toolbatch.hook.duration")
    assert hook.count == 1
    assert hook.attributes == {
        "toolbatch.hook.event": "PostToolBatch",
        "toolbatch.hook.type": "python",
        "toolbatch.hook.outcome": "stop",
    }

    mcp = otel.points("mcp.client.operation.duration")
    echo = point_for(mcp, gen_ai__tool__name="echo")
    assert echo.attributes == {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "network.transport": "pipe",
        "mcp.protocol.version": echo.attributes["mcp.protocol.version"],
    }
    assert str(echo.attributes["mcp.protocol.version"])[:2] == "20"  # a dated MCP version
    assert point_for(mcp, gen_ai__tool__name="fail").attributes["error.type"] == "tool_error"


async def test_a_failed_write_is_a_persistence_failure(otel: Recorded, tmp_path: Path) -> None:
    """An artifact over the store's cap is counted as failed, and the batch goes on."""
    from toolbatch import ArtifactStore

    store = ArtifactStore(tmp_path / "store", max_file_bytes=1_000)
    config = SchedulerConfig(batch_budget=500, store=store)
    async with ToolScheduler(Registry([words]), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="w", name="words", args={"n": 5_000})])
    assert turn.content_length <= 500
    (failure,) = otel.points("toolbatch.artifacts.failed")
    assert failure.value == 1
    assert failure.attributes == {"error.type": "ArtifactCapExceeded"}
    summary = otel.one("toolbatch.turn").attributes or {}
    assert summary["toolbatch.turn.artifacts.failed"] == 1
    assert summary["toolbatch.turn.artifacts.persisted"] == 0
    (span,) = otel.named("toolbatch.artifact.persist")
    assert (span.attributes or {})["error.type"] == "ArtifactCapExceeded"
