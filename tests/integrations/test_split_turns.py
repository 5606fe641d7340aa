"""The calls a framework starts together run as one batch, whoever of them is cancelled."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel

from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool
from toolbatch.integrations._turns import SplitTurns


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _call(index: int) -> ToolCall:
    return ToolCall(id=f"c{index}", name="add", args={"a": index, "b": 100})


async def test_calls_started_together_are_one_batch(tmp_path: Path) -> None:
    """Three calls started in one pass are executed together and completed as one turn."""
    async with ToolScheduler(Registry([add]), SchedulerConfig(artifacts_dir=tmp_path)) as s:
        turns = SplitTurns(s)
        texts: dict[int, str] = {}

        async def run(index: int) -> None:
            texts[index] = await turns.run(_call(index))

        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(run, index)
        assert texts == {0: "100", 1: "101", 2: "102"}
        assert [turns.is_pending(f"c{index}") for index in range(3)] == [True] * 3
        completion = await turns.complete(["c0", "c1", "c2"])
        assert completion.texts == {"c0": "100", "c1": "101", "c2": "102"}
        assert not turns.is_pending("c0")


async def test_a_cancelled_first_call_hands_the_batch_to_the_next(tmp_path: Path) -> None:
    """The first call (the one that would run the batch) is cancelled while the others are
    waiting for it: the next one runs the batch, and nobody waits forever."""
    async with ToolScheduler(Registry([add]), SchedulerConfig(artifacts_dir=tmp_path)) as s:
        turns = SplitTurns(s)
        texts: dict[int, str] = {}
        first = anyio.CancelScope()

        async def run_first() -> None:
            with first:
                texts[0] = await turns.run(_call(0))

        async def run(index: int) -> None:
            if index == 2:
                first.cancel()  # the first call waits for this pass to end: cancelled there
            texts[index] = await turns.run(_call(index))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(run_first)
                group.start_soon(run, 1)
                group.start_soon(run, 2)
        assert first.cancelled_caught
        assert texts == {1: "101", 2: "102"}
        assert not turns.is_pending("c0")
        completion = await turns.complete(["c0", "c1", "c2"])
        assert completion.texts == {"c1": "101", "c2": "102"}
