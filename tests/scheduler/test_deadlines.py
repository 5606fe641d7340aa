"""Each call's own deadline, in a batch whose workers share one cancel scope per run of calls.

A worker runs its calls in one cancel scope and a call's deadline cancels that scope; on
asyncio one event-loop timer serves the whole batch. What a user sees must not change: a
call is stopped at its own deadline (not a neighbour's, not later), the calls after it on
the same worker run normally, and a producer that swallows its cancellation does not
cancel the next call. Each case runs with the batch timer and with the scopes' own
deadlines (what other anyio backends use).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import toolbatch.scheduler._execution as scheduler_module
from toolbatch import ToolCall, ToolResult
from toolbatch.producers import ProducerContext, ToolDeclaration, tool
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler


@pytest.fixture(params=["loop-timer", "scope-deadlines"])
def deadlines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "scope-deadlines":
        monkeypatch.setattr(scheduler_module, "asyncio_loop", lambda: None)
    return str(request.param)


@tool(output_threshold=None, timeout_s=0.3)
async def hangs() -> str:
    """Never answers in time."""
    await anyio.sleep(3600)
    return "never"


@tool(output_threshold=None)
async def quick(n: int) -> str:
    """Answers after a short real wait."""
    await anyio.sleep(0.01)
    return f"quick {n}"


class Slow:
    """A producer with a longer timeout of its own that answers well within it."""

    declaration = ToolDeclaration(name="slow", timeout_s=5.0)

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        await anyio.sleep(1.0)
        return ToolResult(content="slow done")


class Swallows:
    """A producer that catches its cancellation at the deadline and answers anyway."""

    declaration = ToolDeclaration(name="swallows", timeout_s=0.2)

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            return ToolResult(content="kept going")
        return ToolResult(content="never")


def _config(tmp_path: Path, concurrency: int) -> SchedulerConfig:
    return SchedulerConfig(artifacts_dir=tmp_path / "artifacts", concurrency=concurrency)


def _texts(turn_responses: list[object]) -> list[object]:
    out = []
    for response in turn_responses:
        [part] = response.parts  # type: ignore[attr-defined]
        out.append(part.function_response.response)
    return out


@pytest.mark.parametrize("concurrency", [1, 2, 4])
async def test_a_call_is_stopped_at_its_own_deadline_and_the_next_calls_still_run(
    tmp_path: Path, deadlines: str, concurrency: int
) -> None:
    """A slow call (5 s own timeout) starts first; a hanging call with 0.3 s is stopped at
    0.3 s, not at the slow call's later deadline, and the calls behind it answer."""
    calls = [
        ToolCall(id="slow", name="slow"),
        ToolCall(id="hang", name="hangs"),
        *(ToolCall(id=f"q{n}", name="quick", args={"n": n}) for n in range(6)),
    ]
    registry = Registry([Slow(), hangs, quick])
    async with ToolScheduler(registry, _config(tmp_path, concurrency)) as scheduler:
        started = time.monotonic()
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
        elapsed = time.monotonic() - started
    slow, hang, *quicks = turn.responses
    assert slow.status == "success"
    assert _texts([slow]) == [{"output": "slow done"}]
    assert hang.error_type == "timeout"
    assert "0.3 s" in (hang.error or "")
    assert [r.status for r in quicks] == ["success"] * 6
    assert _texts(quicks) == [{"output": f"quick {n}"} for n in range(6)]
    # One worker runs everything in turn; with more, the slow call bounds the batch.
    floor = 1.0 + 0.3 if concurrency == 1 else 1.0
    assert floor <= elapsed < floor + 2.0


async def test_timeouts_on_one_worker_one_after_another(tmp_path: Path, deadlines: str) -> None:
    """Three hanging calls in a row on one worker: each is stopped 0.3 s after it starts."""
    calls = [ToolCall(id=f"h{n}", name="hangs") for n in range(3)]
    calls.append(ToolCall(id="after", name="quick", args={"n": 1}))
    async with ToolScheduler(Registry([hangs, quick]), _config(tmp_path, 1)) as scheduler:
        started = time.monotonic()
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
        elapsed = time.monotonic() - started
    assert [r.error_type for r in turn.responses[:3]] == ["timeout"] * 3
    assert turn.responses[3].status == "success"
    assert 0.9 <= elapsed < 3.0


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_a_producer_that_swallows_its_cancellation_does_not_cancel_the_next_call(
    tmp_path: Path, deadlines: str, concurrency: int
) -> None:
    """The producer's own answer is kept, and the calls after it run in full."""
    calls = [
        ToolCall(id="s", name="swallows"),
        *(ToolCall(id=f"q{n}", name="quick", args={"n": n}) for n in range(4)),
    ]
    registry = Registry([Swallows(), quick])
    async with ToolScheduler(registry, _config(tmp_path, concurrency)) as scheduler:
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls)
    swallowed, *quicks = turn.responses
    assert swallowed.status == "success"
    assert _texts([swallowed]) == [{"output": "kept going"}]
    assert _texts(quicks) == [{"output": f"quick {n}"} for n in range(4)]


async def test_an_abort_still_cancels_every_running_call(tmp_path: Path, deadlines: str) -> None:
    """An abort mid-batch: the running calls are cancelled, the rest never start."""
    abort = anyio.Event()

    @tool(output_threshold=None, timeout_s=60)
    async def waits() -> str:
        """Waits for the abort."""
        await anyio.sleep(3600)
        return "never"

    calls = [ToolCall(id=f"w{n}", name="waits") for n in range(5)]
    scheduler = ToolScheduler(Registry([waits]), _config(tmp_path, 2))
    with anyio.fail_after(10):
        async with scheduler, anyio.create_task_group() as tg:
            tg.start_soon(_abort_soon, abort)
            turn = await scheduler.run_batch(calls, abort=abort)
    assert [r.status for r in turn.responses] == ["cancelled"] * 5


async def _abort_soon(abort: anyio.Event) -> None:
    await anyio.sleep(0.2)
    abort.set()


async def test_a_later_batch_is_stopped_at_its_own_deadline(tmp_path: Path, deadlines: str) -> None:
    """The session's timer, set for an earlier batch's far deadline, still stops a later
    batch's hanging call at its own 0.3 s; a timer that fired for calls that had already
    answered leaves the next batch's deadline watched."""

    @tool(output_threshold=None, timeout_s=0.05)
    async def brief() -> str:
        """Answers at once, under a deadline that passes right after."""
        return "brief"

    registry = Registry([Slow(), hangs, quick, brief])
    async with ToolScheduler(registry, _config(tmp_path, 1)) as scheduler:
        with anyio.fail_after(10):
            first = await scheduler.run_batch([ToolCall(id="q", name="quick", args={"n": 1})])
            assert first.responses[0].status == "success"
            await scheduler.run_batch([ToolCall(id="b", name="brief")])
            await anyio.sleep(0.1)  # the timer set for ``brief`` fires with nothing running
            for index in range(2):
                started = time.monotonic()
                turn = await scheduler.run_batch([ToolCall(id=f"h{index}", name="hangs")])
                elapsed = time.monotonic() - started
                assert turn.responses[0].error_type == "timeout"
                assert 0.3 <= elapsed < 1.5


async def test_concurrent_batches_of_one_session_keep_their_own_deadlines(
    tmp_path: Path, deadlines: str
) -> None:
    """Three batches at once on one scheduler: the hanging call of two is stopped at 0.3 s,
    and the third's call, longer than that but within its own timeout, answers in full."""

    @tool(output_threshold=None, timeout_s=5)
    async def slow() -> str:
        """Answers after the others' deadlines."""
        await anyio.sleep(0.5)
        return "slow done"

    registry = Registry([slow, hangs])
    results: dict[str, list[str | None]] = {}
    async with ToolScheduler(registry, _config(tmp_path, 2)) as scheduler:

        async def batch(name: str, calls: list[ToolCall]) -> None:
            turn = await scheduler.run_batch(calls)
            results[name] = [r.error_type for r in turn.responses]

        started = time.monotonic()
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(batch, "slow", [ToolCall(id="s", name="slow")])
                tg.start_soon(batch, "hang", [ToolCall(id="h", name="hangs")])
                tg.start_soon(batch, "both", [ToolCall(id="h2", name="hangs")])
        elapsed = time.monotonic() - started
    assert results == {"slow": [None], "hang": ["timeout"], "both": ["timeout"]}
    assert 0.5 <= elapsed < 2.5
