"""Sync tools on the lane: results in bulk, yet each call keeps its own timeout, errors,
context and anyio worker-thread powers."""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool
from toolbatch.producers._sync_lane import run_sync_on_lane

_REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


async def test_a_hung_call_holds_up_neither_later_calls_nor_its_own_timeout(
    tmp_path: Path,
) -> None:
    """One sync call blocks until the test ends; the other 20 finish, and the blocked one
    is answered with a timeout at its own deadline."""
    release = threading.Event()

    @tool(timeout_s=1.0)
    def stuck() -> str:
        """Block until released."""
        release.wait(30)
        return "late"

    @tool
    def quick(n: int) -> str:
        """Answer at once."""
        return f"q{n}"

    calls = [ToolCall(id="s", name="stuck")]
    calls += [ToolCall(id=f"q{i}", name="quick", args={"n": i}) for i in range(20)]
    config = SchedulerConfig(artifacts_dir=str(tmp_path), concurrency=4)
    try:
        async with ToolScheduler(Registry([stuck, quick]), config) as scheduler:
            with anyio.fail_after(20):
                turn = await scheduler.run_batch(calls)
    finally:
        release.set()
    by_id = {response.call_id: response for response in turn.responses}
    assert by_id["s"].status == "error"
    assert by_id["s"].error_type == "timeout"
    for i in range(20):
        assert by_id[f"q{i}"].status == "success"
        assert by_id[f"q{i}"].parts[0].function_response.response == {"output": f"q{i}"}  # type: ignore[union-attr]


async def test_errors_context_and_from_thread_reach_the_call() -> None:
    """An exception is raised to its caller; the caller's context variables are seen in the
    thread; anyio.from_thread.run_sync reaches the event loop from inside the function."""
    loop_thread = threading.get_ident()

    def fails() -> None:
        raise ValueError("bad input")

    def reads_context() -> str:
        return _REQUEST.get()

    def calls_back() -> tuple[int, int]:
        return threading.get_ident(), anyio.from_thread.run_sync(threading.get_ident)

    with pytest.raises(ValueError, match="bad input"):
        await run_sync_on_lane(fails)
    _REQUEST.set("r-17")
    assert await run_sync_on_lane(reads_context) == "r-17"
    worker, back = await run_sync_on_lane(calls_back)
    assert worker != loop_thread
    assert back == loop_thread


async def test_many_concurrent_calls_all_answer_in_order_of_their_own_results() -> None:
    """200 concurrent calls each get their own result (none lost or swapped in a bulk
    hand-back)."""
    results: dict[int, int] = {}

    async def one(n: int) -> None:
        results[n] = await run_sync_on_lane(lambda: n * n)

    async with anyio.create_task_group() as group:
        for n in range(200):
            group.start_soon(one, n)
    assert results == {n: n * n for n in range(200)}
