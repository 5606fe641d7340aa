"""Trace context reaches child processes: shell commands and command hooks through
``TRACEPARENT`` / ``TRACESTATE``, MCP servers through ``params._meta``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from tests.telemetry._support import TRACEPARENT, Recorded, hex_id
from toolbatch import SchedulerConfig, ToolCall, ToolScheduler, default_registry, telemetry
from toolbatch.hooks import CommandHook

TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"
REMOTE_TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
REMOTE_SPAN_ID = 0x00F067AA0BA902B7
PRINT_CONTEXT = 'printf "%s|%s" "${TRACEPARENT-unset}" "${TRACESTATE-unset}"'


def _remote_parent() -> object:
    """A context whose current span came from another process, with a tracestate."""
    remote = SpanContext(
        trace_id=REMOTE_TRACE_ID,
        span_id=REMOTE_SPAN_ID,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "opaque-value")]),
    )
    return trace.set_span_in_context(NonRecordingSpan(remote))


def _output(turn: object, call_id: str) -> str:
    for response in turn.responses:  # type: ignore[attr-defined]
        if response.call_id == call_id:
            payload = response.parts[0].function_response.response
            return str(payload.get("output", payload))
    raise AssertionError(f"no response for {call_id}")


@pytest.fixture(autouse=True)
def _no_inherited_context(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRACEPARENT", "TRACESTATE", "BAGGAGE"):
        monkeypatch.delenv(name, raising=False)


async def test_a_shell_command_sees_its_call_span_as_parent(otel: Recorded, tmp_path: Path) -> None:
    """``TRACEPARENT`` names the command's execute_tool span; ``TRACESTATE`` travels too."""
    from opentelemetry import context

    config = SchedulerConfig(artifacts_dir=tmp_path)
    token = context.attach(_remote_parent())  # type: ignore[arg-type]
    try:
        async with ToolScheduler(default_registry(), config) as scheduler:
            turn = await scheduler.run_batch(
                [ToolCall(id="env", name="run_shell_command", args={"command": PRINT_CONTEXT})]
            )
    finally:
        context.detach(token)
    traceparent, tracestate = _output(turn, "env").split("\n")[0].split("|")
    match = TRACEPARENT.fullmatch(traceparent)
    assert match is not None, traceparent
    call = otel.call_spans()["env"]
    assert match.group(1) == hex_id(REMOTE_TRACE_ID, 32) == hex_id(call.context.trace_id, 32)
    assert match.group(2) == hex_id(call.context.span_id)
    assert tracestate == "vendor=opaque-value"
    assert otel.one("toolbatch.turn").parent.span_id == REMOTE_SPAN_ID  # type: ignore[union-attr]


async def test_an_inherited_trace_context_is_replaced_not_mixed(
    otel: Recorded, tmp_path: Path
) -> None:
    """A stale ``TRACESTATE`` in the command's environment does not survive a new parent."""
    stale = {"TRACEPARENT": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "TRACESTATE": "stale=1"}
    config = SchedulerConfig(artifacts_dir=tmp_path, shell_env_set=stale)
    async with ToolScheduler(default_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent"):
            turn = await scheduler.run_batch(
                [ToolCall(id="env", name="run_shell_command", args={"command": PRINT_CONTEXT})]
            )
    traceparent, tracestate = _output(turn, "env").split("\n")[0].split("|")
    call = otel.call_spans()["env"]
    assert traceparent.split("-")[2] == hex_id(call.context.span_id)
    assert tracestate == "unset"


async def test_a_command_hook_sees_its_hook_span_as_parent(otel: Recorded, tmp_path: Path) -> None:
    """The hook process gets ``TRACEPARENT`` naming the ``toolbatch.hook`` span."""
    answer = (
        'printf \'{"hookSpecificOutput": {"hookEventName": "PostToolBatch", '
        '"additionalContext": "parent %s"}}\' "${TRACEPARENT-unset}"'
    )
    hook = CommandHook(["bash", "-c", f"cat > /dev/null; {answer}"])
    config = SchedulerConfig(artifacts_dir=tmp_path, hooks=[hook])
    async with ToolScheduler(default_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent"):
            turn = await scheduler.run_batch(
                [ToolCall(id="a", name="run_shell_command", args={"command": "true"})]
            )
    context_text = str(turn.parts[-1].text)  # type: ignore[union-attr]
    traceparent = context_text.removeprefix("parent ")
    match = TRACEPARENT.fullmatch(traceparent)
    assert match is not None, context_text
    (hook_span,) = otel.named("toolbatch.hook PostToolBatch")
    assert match.group(1) == hex_id(hook_span.context.trace_id, 32)
    assert match.group(2) == hex_id(hook_span.context.span_id)
    assert hook_span.attributes["toolbatch.hook.type"] == "command"  # type: ignore[index]


async def test_an_mcp_request_carries_the_call_span_in_meta(otel: Recorded, tmp_path: Path) -> None:
    """``tools/call`` carries ``traceparent`` in ``params._meta``, unprefixed (SEP-414)."""
    servers = {"mcpServers": {"test": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}
    config = SchedulerConfig(artifacts_dir=tmp_path, mcp_servers=servers)
    async with ToolScheduler(default_registry(), config) as scheduler:
        with otel.tracer.start_as_current_span("invoke_agent"):
            turn = await scheduler.run_batch([ToolCall(id="m", name="mcp__test__meta")])
    meta = json.loads(_output(turn, "m"))
    match = TRACEPARENT.fullmatch(meta["traceparent"])
    assert match is not None, meta
    call = otel.call_spans()["m"]
    assert match.group(1) == hex_id(call.context.trace_id, 32)
    assert match.group(2) == hex_id(call.context.span_id)


async def test_nothing_is_added_when_telemetry_is_off(tmp_path: Path) -> None:
    """Without an SDK (and with one but disabled), a command's environment is its own."""
    config = SchedulerConfig(artifacts_dir=tmp_path)
    call = ToolCall(id="env", name="run_shell_command", args={"command": PRINT_CONTEXT})
    async with ToolScheduler(default_registry(), config) as scheduler:
        turn = await scheduler.run_batch([call])
        assert _output(turn, "env").split("\n")[0] == "unset|unset"
        recorded = Recorded()
        telemetry.configure(enabled=False, tracer_provider=recorded.tracer_provider)
        try:
            with recorded.tracer.start_as_current_span("invoke_agent"):
                turn = await scheduler.run_batch([call])
        finally:
            telemetry.configure()
    assert _output(turn, "env").split("\n")[0] == "unset|unset"
    assert [span.name for span in recorded.spans()] == ["invoke_agent"]


def test_environment_keys_are_normalised_as_the_carrier_spec_says() -> None:
    """Uppercase, ``[^A-Za-z0-9_]`` to ``_``, ``_`` before a leading digit, never empty."""
    assert telemetry.environment_key("traceparent") == "TRACEPARENT"
    assert telemetry.environment_key("x-b3-traceid") == "X_B3_TRACEID"
    assert telemetry.environment_key("1st.key") == "_1ST_KEY"
    assert telemetry.environment_key("") == "_"
