"""Scheduler benchmarks (issue 18's rows): per-call overhead and sync Python tools.

* ``run_batch`` of 1,000 no-op async calls against a bare ``asyncio.TaskGroup`` running the
  same coroutines, alternately in the same process; the overhead per call is the
  difference of the medians divided by the calls (target: at most 5 µs per call). Both
  are timed in CPU time of the process (``time.process_time``): everything runs on the
  event loop's thread, and on this shared 2-core machine other processes stretch wall
  time by 2-3x from one minute to the next while CPU time stays put.
* 10,000 calls of a sync Python tool (``@tool def``) through ``run_batch``: wall time per
  call (target: at most 100 µs), next to the same function run 10,000 times through a
  plain ``ThreadPoolExecutor.map`` (what a thread hop per call costs without a runtime).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import anyio

from bench._report import Row, Target
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool

TARGET_US_PER_CALL = 5.0
"""Issue 30 (issue 18's was 8): scheduler overhead per no-op call of a 1,000-call batch,
vs a TaskGroup."""
SYNC_TARGET_US_PER_CALL = 100.0
"""Issue 18: 10,000 sync Python tool calls, wall time per call."""
SYNC_CALLS = 10_000


@tool(output_threshold=None)
async def noop() -> str:
    """Do nothing."""
    return "ok"


@tool(output_threshold=None)
def sync_noop() -> str:
    """Do nothing, synchronously."""
    return "ok"


async def _bare(n: int) -> float:
    async def one() -> str:
        return "ok"

    started = time.process_time()
    async with asyncio.TaskGroup() as tg:
        for _ in range(n):
            tg.create_task(one())
    return time.process_time() - started


async def _scheduler(n: int, repeats: int) -> tuple[list[float], list[float]]:
    calls = [ToolCall(id=f"c{i}", name="noop") for i in range(n)]
    ours: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = SchedulerConfig(artifacts_dir=tmp)  # default concurrency (10)
        async with ToolScheduler(Registry([noop]), config) as scheduler:
            await scheduler.run_batch(calls[:10])  # warm up
            for _ in range(repeats):
                started = time.process_time()
                turn = await scheduler.run_batch(calls)
                ours.append(time.process_time() - started)
                assert len(turn.responses) == n
                bare.append(await _bare(n))
    return ours, bare


def _plain_function() -> str:
    return "ok"


async def _sync_tools(n: int, repeats: int) -> tuple[list[float], list[float]]:
    calls = [ToolCall(id=f"s{i}", name="sync_noop") for i in range(n)]
    ours: list[float] = []
    pool: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = SchedulerConfig(artifacts_dir=tmp)
        async with ToolScheduler(Registry([sync_noop]), config) as scheduler:
            await scheduler.run_batch(calls[:10])  # warm up
            for _ in range(repeats):
                started = time.perf_counter()
                turn = await scheduler.run_batch(calls)
                ours.append(time.perf_counter() - started)
                assert len(turn.responses) == n
                assert all(r.status == "success" for r in turn.responses)
                with ThreadPoolExecutor(max_workers=10) as executor:
                    started = time.perf_counter()
                    list(executor.map(lambda _: _plain_function(), range(n)))
                    pool.append(time.perf_counter() - started)
    return ours, pool


def run(quick: bool) -> list[Row]:
    n = 1_000
    ours, bare = anyio.run(_scheduler, n, 3 if quick else 7)
    ours_s = statistics.median(ours)
    bare_s = statistics.median(bare)
    overhead_us = (ours_s - bare_s) / n * 1e6
    sync_ours, sync_pool = anyio.run(_sync_tools, SYNC_CALLS, 2 if quick else 3)
    sync_us = statistics.median(sync_ours) / SYNC_CALLS * 1e6
    pool_us = statistics.median(sync_pool) / SYNC_CALLS * 1e6
    return [
        Row(
            area="scheduler",
            name=f"run_batch, {n:,} no-op calls (concurrency 10), overhead per call",
            value=overhead_us,
            unit="µs/call",
            baseline=f"bare asyncio.TaskGroup: {bare_s / n * 1e6:.1f} µs/call (CPU time)",
            baseline_value=None,
            ratio=ours_s / bare_s,
            target=f"<= {TARGET_US_PER_CALL:g} µs/call overhead (ratio = ours / bare time)",
            goal=Target("value", "<=", TARGET_US_PER_CALL),
        ),
        Row(
            area="scheduler",
            name=f"{SYNC_CALLS:,} sync Python tool calls through run_batch",
            value=sync_us,
            unit="µs/call",
            baseline="same function, ThreadPoolExecutor(10).map",
            baseline_value=pool_us,
            ratio=sync_us / pool_us,
            target=f"<= {SYNC_TARGET_US_PER_CALL:g} µs/call (wall time per call)",
            goal=Target("value", "<=", SYNC_TARGET_US_PER_CALL),
        ),
    ]
