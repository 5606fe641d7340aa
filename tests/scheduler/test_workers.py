"""A batch's workers: the calling task runs the calls, and the other workers start only once
one of its calls suspends.

What a user sees must not change: calls that wait run concurrently up to the limit (never
beyond it) and start in the model's order; calls that never suspend give the same responses
whatever the limit, and start no task at all. Each case runs with the batch's event-loop
timer (asyncio: the workers start when a call suspends) and with the scopes' own deadlines
(other anyio backends: every worker starts at once).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import toolbatch.scheduler._execution as scheduler_module
from tests.strategies import scaled
from toolbatch import ToolCall
from toolbatch.producers import tool
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

SLEEP_S = 0.3


@pytest.fixture(params=["loop-timer", "scope-deadlines"])
def deadlines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "scope-deadlines":
        monkeypatch.setattr(scheduler_module, "asyncio_loop", lambda: None)
    return str(request.param)


class Gauge:
    """What the batch's calls saw: the order they started in, and how many ran at once."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.running = 0
        self.peak = 0
        self.tasks = 0

    def enter(self, i: int) -> None:
        self.started.append(i)
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.tasks = max(self.tasks, len(asyncio.all_tasks()))


def _registry(gauge: Gauge) -> Registry:
    @tool(output_threshold=None)
    async def wait(i: int, seconds: float) -> str:
        """Wait, then answer."""
        gauge.enter(i)
        await anyio.sleep(seconds)
        gauge.running -= 1
        return f"waited {i}"

    @tool(output_threshold=None)
    async def instant(i: int) -> str:
        """Answer without ever suspending."""
        gauge.enter(i)
        gauge.running -= 1
        return f"instant {i}"

    return Registry([wait, instant])


def _config(tmp_path: Path, concurrency: int) -> SchedulerConfig:
    return SchedulerConfig(artifacts_dir=tmp_path / "artifacts", concurrency=concurrency)


def _wait(i: int, seconds: float = SLEEP_S) -> ToolCall:
    return ToolCall(id=f"w{i}", name="wait", args={"i": i, "seconds": seconds})


def _instant(i: int) -> ToolCall:
    return ToolCall(id=f"i{i}", name="instant", args={"i": i})


@pytest.mark.parametrize("lead", [0, 20], ids=["waits-first", "after-20-instant"])
async def test_calls_that_wait_run_at_once_up_to_the_limit(
    tmp_path: Path, deadlines: str, lead: int
) -> None:
    """Ten calls that each sleep 0.3 s at a limit of 5 take two sleeps, not ten, even when
    20 calls that never suspend come first; never more than 5 run at once."""
    gauge = Gauge()
    calls = [_instant(i) for i in range(lead)] + [_wait(lead + i) for i in range(10)]
    async with ToolScheduler(_registry(gauge), _config(tmp_path, 5)) as scheduler:
        started = time.monotonic()
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
        elapsed = time.monotonic() - started
    assert [r.status for r in turn.responses] == ["success"] * len(calls)
    assert gauge.peak == 5
    assert gauge.started == list(range(len(calls)))
    assert 2 * SLEEP_S <= elapsed < 3 * SLEEP_S


async def test_a_long_call_does_not_hold_back_the_calls_behind_it(
    tmp_path: Path, deadlines: str
) -> None:
    """A first call that sleeps 0.6 s: the eight quick calls behind it answer meanwhile."""
    gauge = Gauge()
    calls = [_wait(0, 2 * SLEEP_S), *(_wait(i, 0.01) for i in range(1, 9))]
    async with ToolScheduler(_registry(gauge), _config(tmp_path, 3)) as scheduler:
        started = time.monotonic()
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
        elapsed = time.monotonic() - started
    assert [r.status for r in turn.responses] == ["success"] * 9
    assert gauge.peak == 3
    assert gauge.started == list(range(9))
    assert 2 * SLEEP_S <= elapsed < 3 * SLEEP_S


async def test_calls_that_never_suspend_answer_alike_and_start_no_task(
    tmp_path: Path, deadlines: str
) -> None:
    """50 calls that never suspend: the same responses at a limit of 10 as at 1, in order,
    one at a time; on asyncio no worker task starts for them."""
    calls = [_instant(i) for i in range(50)]
    seen: dict[int, Gauge] = {}
    texts: dict[int, list[object]] = {}
    for concurrency in (1, 10):
        gauge = seen[concurrency] = Gauge()
        async with ToolScheduler(_registry(gauge), _config(tmp_path, concurrency)) as scheduler:
            before = len(asyncio.all_tasks())
            turn = await scheduler.run_batch(calls)
        texts[concurrency] = [r.model_dump(mode="json") for r in turn.responses]
        assert gauge.started == list(range(50))
        assert gauge.peak == 1
        if deadlines == "loop-timer":
            assert gauge.tasks == before
    assert texts[10] == texts[1]
    outputs = [part.function_response.response for r in turn.responses for part in r.parts]
    assert outputs == [{"output": f"instant {i}"} for i in range(50)]


@settings(
    max_examples=scaled(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    kinds=st.lists(st.sampled_from([None, 0.0, 0.002]), min_size=1, max_size=30),
    concurrency=st.integers(min_value=1, max_value=6),
)
async def test_any_mix_of_calls_starts_in_order_within_the_limit(
    tmp_path: Path, deadlines: str, kinds: list[float | None], concurrency: int
) -> None:
    """Calls that never suspend, yield once (sleep 0) or wait, in any mix: every call answers
    once, in order, they start in the model's order and never more than the limit at once."""
    gauge = Gauge()
    calls = [_instant(i) if kind is None else _wait(i, kind) for i, kind in enumerate(kinds)]
    async with ToolScheduler(_registry(gauge), _config(tmp_path, concurrency)) as scheduler:
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
    assert [r.call_id for r in turn.responses] == [c.id for c in calls]
    assert [r.status for r in turn.responses] == ["success"] * len(calls)
    assert gauge.started == list(range(len(calls)))
    assert gauge.peak <= concurrency


async def test_a_batch_aborted_before_it_starts_runs_no_call(
    tmp_path: Path, deadlines: str
) -> None:
    """The abort is already set: no tool runs (the first worker is the calling task, which
    would otherwise answer calls that never suspend before the abort is seen)."""
    gauge = Gauge()
    abort = anyio.Event()
    abort.set()
    calls = [_instant(i) for i in range(20)] + [_wait(20)]
    async with ToolScheduler(_registry(gauge), _config(tmp_path, 4)) as scheduler:
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls, abort=abort)
    assert gauge.started == []
    assert [r.status for r in turn.responses] == ["cancelled"] * 21
    assert all("cancelled by the user" in (r.error or "") for r in turn.responses)
