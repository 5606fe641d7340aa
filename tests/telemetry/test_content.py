"""No tool content (arguments, output) on spans unless it is explicitly switched on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.telemetry._support import Recorded, attributes
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, telemetry, tool
from toolbatch.producers import ShellProducer

SECRET_ARGUMENT = "argument-4f1d-private"
SECRET_OUTPUT = "output-9a2c-private"


@tool
def lookup(customer: str) -> str:
    """Look a customer up."""
    return f"{SECRET_OUTPUT} for {customer}"


@tool
def refuse(customer: str) -> str:
    """Fail, naming the customer."""
    raise PermissionError(f"no access to {customer}")


CALLS = [
    ToolCall(id="ok", name="lookup", args={"customer": SECRET_ARGUMENT}),
    ToolCall(id="no", name="refuse", args={"customer": SECRET_ARGUMENT}),
    ToolCall(
        id="sh",
        name="run_shell_command",
        args={"command": f"echo {SECRET_OUTPUT} {SECRET_ARGUMENT}"},
    ),
]


async def _run(tmp_path: Path) -> None:
    registry = Registry([lookup, refuse, ShellProducer()])
    async with ToolScheduler(registry, SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        await scheduler.run_batch(CALLS)


def _every_value(otel: Recorded) -> list[str]:
    values = []
    for span in otel.spans():
        values.extend(str(value) for value in attributes(span).values())
        values.extend(str(event.attributes) for event in span.events)
        values.append(str(span.status.description))
    return values


async def test_no_content_is_recorded_by_default(
    otel: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the arguments nor the output appear anywhere in any span."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    await _run(tmp_path)
    assert len(otel.call_spans()) == 3
    for value in _every_value(otel):
        assert SECRET_ARGUMENT not in value
        assert SECRET_OUTPUT not in value
    for span in otel.spans():
        assert "gen_ai.tool.call.arguments" not in attributes(span)
        assert "gen_ai.tool.call.result" not in attributes(span)


@pytest.mark.parametrize(
    "switch",
    [
        pytest.param("configure", id="configure(capture_content=True)"),
        pytest.param("true", id="env-true"),
        pytest.param("SPAN_ONLY", id="env-SPAN_ONLY"),
    ],
)
async def test_content_is_recorded_when_switched_on(
    otel: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    """The opt-in attributes of the conventions: arguments always, the result on success."""
    if switch == "configure":
        telemetry.configure(
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
            capture_content=True,
        )
    else:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", switch)
    await _run(tmp_path)
    spans = otel.call_spans()
    for call in CALLS:
        arguments = attributes(spans[call.id])["gen_ai.tool.call.arguments"]
        assert json.loads(arguments) == call.args
    result = json.loads(attributes(spans["ok"])["gen_ai.tool.call.result"])
    assert SECRET_OUTPUT in json.dumps(result)
    assert SECRET_OUTPUT in attributes(spans["sh"])["gen_ai.tool.call.result"]
    assert "gen_ai.tool.call.result" not in attributes(spans["no"])  # only on success


async def test_the_environment_switch_is_off_for_other_values(
    otel: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NO_CONTENT`` (and ``EVENT_ONLY``: toolbatch records no events) keep content off."""
    for value in ("NO_CONTENT", "EVENT_ONLY", "false"):
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
        assert telemetry.capture_content() is False
    telemetry.configure(capture_content=False)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert telemetry.capture_content() is False  # the program's choice wins


async def test_captured_content_is_bounded(otel: Recorded, tmp_path: Path) -> None:
    """With capture on, a 2 MB argument and its 2 MB echo are at most 32,768 characters each."""
    telemetry.configure(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        capture_content=True,
    )
    registry = Registry([lookup])
    config = SchedulerConfig(artifacts_dir=tmp_path, batch_budget=None)
    call = ToolCall(id="big", name="lookup", args={"customer": "c" * 2_000_000})
    async with ToolScheduler(registry, config) as scheduler:
        await scheduler.run_batch([call])
    span = otel.call_spans()["big"]
    assert len(attributes(span)["gen_ai.tool.call.arguments"]) <= 32_768
    assert len(attributes(span)["gen_ai.tool.call.result"]) <= 32_768
