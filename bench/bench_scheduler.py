"""Issue 6: per-call overhead of run_batch against a bare asyncio.TaskGroup."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time

import anyio

from bench._report import Row, Target
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool

TARGET_US_PER_CALL = 100.0


@tool(output_threshold=None)
async def noop() -> str:
    """Do nothing."""
    return "ok"


async def _bare(n: int) -> float:
    async def one() -> str:
        return "ok"

    started = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(n):
            tg.create_task(one())
    return time.perf_counter() - started


async def _scheduler(n: int, repeats: int) -> tuple[list[float], list[float]]:
    calls = [ToolCall(id=f"c{i}", name="noop") for i in range(n)]
    ours: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = SchedulerConfig(artifacts_dir=tmp)  # default concurrency (10)
        async with ToolScheduler(Registry([noop]), config) as scheduler:
            await scheduler.run_batch(calls[:10])  # warm up
            for _ in range(repeats):
                started = time.perf_counter()
                turn = await scheduler.run_batch(calls)
                ours.append(time.perf_counter() - started)
                assert len(turn.responses) == n
                bare.append(await _bare(n))
    return ours, bare


def run(quick: bool) -> list[Row]:
    n = 1_000
    ours, bare = anyio.run(_scheduler, n, 3 if quick else 7)
    ours_s = statistics.median(ours)
    bare_s = statistics.median(bare)
    overhead_us = (ours_s - bare_s) / n * 1e6
    return [
        Row(
            area="scheduler",
            name=f"run_batch, {n:,} no-op calls (concurrency 10), overhead per call",
            value=overhead_us,
            unit="µs/call",
            baseline=f"bare asyncio.TaskGroup: {bare_s / n * 1e6:.1f} µs/call",
            baseline_value=None,
            ratio=ours_s / bare_s,
            target=f"<= {TARGET_US_PER_CALL:g} µs/call overhead (ratio = ours / bare time)",
            goal=Target("value", "<=", TARGET_US_PER_CALL),
        )
    ]
