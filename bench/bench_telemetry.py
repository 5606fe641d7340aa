"""Issue 19: what OpenTelemetry costs the scheduler per call.

The targeted row compares, in the same process and interleaved batch by batch, the
scheduler with telemetry in its default state and no SDK configured (the API imported, as
the MCP SDK imports it, so every check runs and finds nothing to record) against the
scheduler with telemetry switched off (``toolbatch.telemetry.configure(enabled=False)``,
which is also the path without OpenTelemetry installed). Batches are timed in CPU time of
this process (``time.process_time``), which the other processes of a loaded machine
disturb far less than wall time, with the garbage collector held off during each batch;
the figure is the median, over many pairs of neighbouring batches, of their difference, per
call. The diagnostic row shows the cost with an SDK recording every
span and metric (in memory), to compare with what a call costs anyway.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable

import anyio
import opentelemetry.trace  # noqa: F401  # imported as in any process that uses MCP
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench._report import Row, Target
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, telemetry, tool

TARGET_US_PER_CALL = 2.0
CALLS = 500


@tool(output_threshold=None)
async def noop() -> str:
    """Do nothing."""
    return "ok"


def _disabled() -> None:
    telemetry.configure(enabled=False)


def _no_sdk() -> None:
    telemetry.configure()


async def _single_calls(pairs: int) -> list[float]:
    """Batches of one call, no SDK against off, pair by pair: the per-batch checks whole."""
    calls = [ToolCall(id="c", name="noop")]
    diffs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with ToolScheduler(Registry([noop]), SchedulerConfig(artifacts_dir=tmp)) as scheduler:
            for setup in (_disabled, _no_sdk):
                setup()
                await scheduler.run_batch(calls)
            gc.collect()
            gc.disable()
            try:
                for pair in range(pairs):
                    took = {}
                    for setup in (_disabled, _no_sdk) if pair % 2 else (_no_sdk, _disabled):
                        setup()
                        started = time.process_time()
                        await scheduler.run_batch(calls)
                        took[setup] = time.process_time() - started
                    diffs.append(took[_no_sdk] - took[_disabled])
            finally:
                gc.enable()
    telemetry.configure()
    return diffs


async def _measure(repeats: int) -> dict[str, list[float]]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def recording() -> None:
        exporter.clear()
        telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)

    modes: dict[str, Callable[[], None]] = {
        "disabled": _disabled,
        "no_sdk": _no_sdk,
        "sdk": recording,
    }
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    calls = [ToolCall(id=f"c{i}", name="noop") for i in range(CALLS)]
    with tempfile.TemporaryDirectory() as tmp:
        async with ToolScheduler(Registry([noop]), SchedulerConfig(artifacts_dir=tmp)) as scheduler:
            for setup in modes.values():  # warm up every path
                setup()
                await scheduler.run_batch(calls[:50])
            order = list(modes)
            for repeat in range(repeats):
                for mode in order if repeat % 2 == 0 else reversed(order):
                    modes[mode]()
                    gc.collect()
                    gc.disable()  # a collection landing in one mode's batch is noise
                    try:
                        started = time.process_time()
                        turn = await scheduler.run_batch(calls)
                        times[mode].append(time.process_time() - started)
                    finally:
                        gc.enable()
                    assert len(turn.responses) == CALLS
    telemetry.configure()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return times


async def _code_alone_us(iterations: int) -> tuple[float, float]:
    """What the no-op telemetry code costs by itself, timed without the scheduler around it:
    per call (the turn lookup a worker does) and per batch (starting a turn that nothing
    records, once in ``execute`` and once in ``complete_turn``)."""
    _no_sdk()
    started = time.process_time()
    for _ in range(iterations):
        turn = telemetry.current_turn()
        if turn is not None:
            raise AssertionError("no SDK is configured: there is no turn")
    per_call = (time.process_time() - started) / iterations * 1e6
    started = time.process_time()
    for _ in range(iterations // 10):
        if telemetry.begin_turn(None) is not None or telemetry.begin_turn(None) is not None:
            raise AssertionError("no SDK is configured: no turn starts")
    per_batch = (time.process_time() - started) / (iterations // 10) * 1e6
    return per_call, per_batch


def _paired_us(ours: list[float], off: list[float]) -> float:
    """The median of the batch-by-batch differences, per call: neighbours share the load."""
    return statistics.median(a - b for a, b in zip(ours, off, strict=True)) / CALLS * 1e6


def run(quick: bool) -> list[Row]:
    times = anyio.run(_measure, 15 if quick else 60)
    per_call_code, per_batch_code = anyio.run(_code_alone_us, 100_000 if quick else 500_000)
    single = anyio.run(_single_calls, 1_000 if quick else 3_000)
    single_us = statistics.median(single) * 1e6
    per_call_us = {mode: statistics.median(values) / CALLS * 1e6 for mode, values in times.items()}
    added = _paired_us(times["no_sdk"], times["disabled"])
    recording = _paired_us(times["sdk"], times["disabled"])
    return [
        Row(
            area="telemetry",
            name=f"no SDK configured vs telemetry off, {CALLS:,} no-op calls, added per call",
            value=added,
            unit="µs/call",
            baseline="telemetry off (CPU time per call, median batch)",
            baseline_value=per_call_us["disabled"],
            ratio=per_call_us["no_sdk"] / per_call_us["disabled"],
            target=f"<= {TARGET_US_PER_CALL:g} µs/call added (ratio = no SDK / off)",
            goal=Target("value", "<=", TARGET_US_PER_CALL),
        ),
        Row(
            area="telemetry",
            name="no SDK configured vs telemetry off, batches of 1 call, added per call",
            value=single_us,
            unit="µs/call",
            baseline=f"telemetry off, {len(single):,} pairs of one-call batches (CPU time)",
            baseline_value=None,
            ratio=None,
            target="diagnostic: a batch's two checks (below) fall on its only call",
        ),
        Row(
            area="telemetry",
            name="an SDK recording every span and metric (in memory), added per call",
            value=recording,
            unit="µs/call",
            baseline="telemetry off",
            baseline_value=per_call_us["disabled"],
            ratio=per_call_us["sdk"] / per_call_us["disabled"],
            target="diagnostic: the price of recording, paid only when an SDK is configured",
        ),
        Row(
            area="telemetry",
            name="the no-op telemetry code alone, no SDK: per call + per batch / calls",
            value=per_call_code + per_batch_code / CALLS,
            unit="µs/call",
            baseline=(
                f"{per_call_code:.3f} µs per call + {per_batch_code:.2f} µs per batch "
                f"(/ {CALLS} calls)"
            ),
            baseline_value=None,
            ratio=None,
            target="diagnostic: explains the row above without the scheduler's noise",
        ),
    ]
