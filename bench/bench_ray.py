"""Ray benchmarks (issue 21): 200 remote sessions against the same sessions in-process.

Every session runs 10-call batches of a cheap Python tool, so what is measured is what
toolbatch.ray adds (Ray's round trip, the codec, the host's event loop), not the tools:

* throughput: all 200 sessions run a batch at once, round after round; batches per second
  through ``SessionPool`` (a local Ray instance, 20 sessions per host) against 200
  ``ToolScheduler``s in this process. On one 2-core machine the hosts, Ray's own processes
  and the driver share the same two cores, so the in-process figure is the ceiling; the
  target is that Ray keeps at least a tenth of it (a cluster adds cores per node instead).
* per-batch overhead: one session's batches one after another, on a host with nothing else
  to do; the median time of a remote batch minus the median of the same batch in-process
  (target: at most 5 ms, under 1 % of the seconds a model turn takes).
* diagnostics: the driver's CPU per batch, how long a host takes to start and what its
  process costs in memory (proportional set size): the figures the scaling note in
  toolbatch/ray/README.md uses.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench._report import Row, Target
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool

SESSIONS = 200
CALLS = 10
PER_HOST = 20
OVERHEAD_TARGET_MS = 5.0
THROUGHPUT_TARGET_RATIO = 0.1


@tool(output_threshold=None)
async def lookup(key: str) -> str:
    """Answer a key (a stand-in for a cheap read-only tool)."""
    return f"value of {key}"


def lookup_registry(workspace: Path) -> Registry:
    """The benchmark's tools (called on each host)."""
    return Registry([lookup])


def _batch(session: int, round_: int) -> list[ToolCall]:
    return [
        ToolCall(id=f"s{session}-r{round_}-c{i}", name="lookup", args={"key": f"k{i}"})
        for i in range(CALLS)
    ]


async def _rounds(sessions: list[Any], rounds: int) -> float:
    """Seconds for ``rounds`` rounds of one batch per session, all sessions at once."""

    async def one(index: int, round_: int) -> None:
        turn = await sessions[index].run_batch(_batch(index, round_))
        assert len(turn.responses) == CALLS
        assert all(r.status == "success" for r in turn.responses)

    started = time.perf_counter()
    for round_ in range(rounds):
        async with anyio.create_task_group() as tg:
            for index in range(len(sessions)):
                tg.start_soon(one, index, round_)
    return time.perf_counter() - started


async def _sequential(session: Any, batches: int) -> list[float]:
    times = []
    for round_ in range(batches):
        started = time.perf_counter()
        await session.run_batch(_batch(0, 10_000 + round_))
        times.append(time.perf_counter() - started)
    return times


def _pss_mb(pid: int) -> float:
    """A process's proportional set size, in MB (shared pages split among their users)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _local(rounds: int, batches: int, tmp: str) -> tuple[float, list[float]]:
    config = SchedulerConfig(artifacts_dir=tmp)
    async with contextlib.AsyncExitStack() as stack:
        schedulers = [
            await stack.enter_async_context(ToolScheduler(lookup_registry(Path(tmp)), config))
            for _ in range(SESSIONS)
        ]
        await _rounds(schedulers, 1)  # warm up
        elapsed = await _rounds(schedulers, rounds)
        sequential = await _sequential(schedulers[0], batches)
    return elapsed, sequential


async def _remote(rounds: int, batches: int, tmp: str) -> dict[str, Any]:
    from toolbatch.ray import SessionPool

    config = SchedulerConfig(artifacts_dir=tmp)
    started = time.perf_counter()
    async with SessionPool(SESSIONS, lookup_registry, config, sessions_per_host=PER_HOST) as pool:
        opened_s = time.perf_counter() - started
        await _rounds(list(pool), 1)  # warm up
        cpu = time.process_time()
        elapsed = await _rounds(list(pool), rounds)
        driver_cpu_s = time.process_time() - cpu
        pids = [await host.pid.remote() for host in pool.hosts]
        pss = [_pss_mb(pid) for pid in pids]
    # One session per host, as the default places them: what one host costs to start.
    started = time.perf_counter()
    async with SessionPool(4, lookup_registry, config) as singles:
        single_open_s = (time.perf_counter() - started) / len(singles)
        single_pss = [_pss_mb(await host.pid.remote()) for host in singles.hosts]
        # Batches one after another on a session whose host has nothing else to do (the
        # pool above is closed): the overhead itself, not the contention of 2 cores.
        await _sequential(singles[0], 5)
        sequential = await _sequential(singles[0], batches)
        round_trips = []
        for _ in range(batches):
            started = time.perf_counter()
            await singles.hosts[0].pid.remote()
            round_trips.append(time.perf_counter() - started)
    return {
        "elapsed": elapsed,
        "sequential": sequential,
        "opened_s": opened_s,
        "hosts": len(pids),
        "pss": statistics.median(pss),
        "single_open_s": single_open_s,
        "single_pss": statistics.median(single_pss),
        "driver_cpu_s": driver_cpu_s,
        "round_trip_ms": statistics.median(round_trips) * 1000,
    }


def run(quick: bool) -> list[Row]:
    import ray

    rounds = 3 if quick else 10
    batches = 30 if quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        local_s, local_seq = anyio.run(_local, rounds, batches, tmp)
        ray.init(
            num_cpus=os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        try:
            remote = anyio.run(_remote, rounds, batches, tmp)
        finally:
            ray.shutdown()
    total = SESSIONS * rounds
    local_rate = total / local_s
    remote_rate = total / remote["elapsed"]
    local_ms = statistics.median(local_seq) * 1000
    remote_ms = statistics.median(remote["sequential"]) * 1000
    overhead_ms = remote_ms - local_ms
    return [
        Row(
            area="ray",
            name=f"{SESSIONS} sessions x {CALLS}-call batches, all at once ({PER_HOST}/host)",
            value=remote_rate,
            unit="batches/s",
            baseline=f"the same {SESSIONS} sessions in-process",
            baseline_value=local_rate,
            ratio=remote_rate / local_rate,
            target=f"ratio >= {THROUGHPUT_TARGET_RATIO:g} (Ray / in-process, one 2-core machine)",
            goal=Target("ratio", ">=", THROUGHPUT_TARGET_RATIO),
        ),
        Row(
            area="ray",
            name=f"per-batch overhead, one session, {CALLS}-call batches one after another",
            value=overhead_ms,
            unit="ms/batch",
            baseline=(
                f"in-process {local_ms:.2f} ms, remote {remote_ms:.2f} ms; a bare Ray actor "
                f"call {remote['round_trip_ms']:.2f} ms (medians)"
            ),
            baseline_value=None,
            ratio=remote_ms / local_ms,
            target=f"<= {OVERHEAD_TARGET_MS:g} ms/batch over in-process",
            goal=Target("value", "<=", OVERHEAD_TARGET_MS),
        ),
        Row(
            area="ray",
            name="driver CPU per remote batch (the rounds above)",
            value=remote["driver_cpu_s"] / total * 1000,
            unit="ms/batch",
            baseline="what one driver process spends to send a batch and take its turn",
            baseline_value=None,
            ratio=None,
            target="diagnostic (for the scaling note)",
        ),
        Row(
            area="ray",
            name=f"open {SESSIONS} sessions on {remote['hosts']} hosts",
            value=remote["opened_s"],
            unit="s",
            baseline=f"one session per host: {remote['single_open_s']:.2f} s per host",
            baseline_value=None,
            ratio=None,
            target="diagnostic (a host is a Ray worker process)",
        ),
        Row(
            area="ray",
            name=f"memory of a host with {PER_HOST} sessions (PSS)",
            value=remote["pss"],
            unit="MB",
            baseline=f"a host with one session: {remote['single_pss']:.0f} MB",
            baseline_value=remote["single_pss"],
            ratio=remote["pss"] / remote["single_pss"],
            target="diagnostic (for the scaling note)",
        ),
    ]
