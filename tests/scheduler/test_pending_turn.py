"""The turn object: ``execute`` returns a ``PendingTurn``; ``complete_turn`` takes it once."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.strategies import scaled
from toolbatch import (
    JsonlRecorder,
    PendingTurn,
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
    TurnAlreadyCompleted,
    tool,
)


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


def _registry() -> Registry:
    registry = Registry()
    registry.register(echo)
    return registry


def _skipped(call_id: str, ordinal: int) -> ToolCallResponse:
    return ToolCallResponse.failed(
        ToolCall(id=call_id, name="echo", args={"text": "never"}, ordinal=ordinal),
        "skipped: not run in this turn",
        status="skipped",
        error_type="skipped",
    )


async def test_a_turn_completes_once_and_a_second_completion_is_a_clear_error(
    tmp_path: Path,
) -> None:
    """Completing the same turn twice raises; the first turn is unaffected."""
    config = SchedulerConfig(artifacts_dir=tmp_path)
    async with ToolScheduler(_registry(), config) as scheduler:
        pending = await scheduler.execute([ToolCall(id="a", name="echo", args={"text": "hi"})])
        assert isinstance(pending, PendingTurn)
        assert not pending.completed
        turn = await scheduler.complete_turn(pending)
        assert pending.completed
        with pytest.raises(TurnAlreadyCompleted, match="already completed"):
            await scheduler.complete_turn(pending)
        with pytest.raises(TurnAlreadyCompleted):
            pending.add(_skipped("late", 1), ordinal=1)
    assert [r.call_id for r in turn.responses] == ["a"]


async def test_the_runtime_answers_merge_at_their_place_in_the_models_order(
    tmp_path: Path,
) -> None:
    """Responses the runtime answered itself land at their ordinal, between executed ones."""
    calls = [
        ToolCall(id="first", name="echo", args={"text": "1"}, ordinal=0),
        ToolCall(id="third", name="echo", args={"text": "3"}, ordinal=2),
    ]
    async with ToolScheduler(_registry(), SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        pending = await scheduler.execute(calls)
        pending.add(_skipped("fourth", 3), ordinal=3)
        pending.add(_skipped("second", 1), ordinal=1)
        assert [r.call_id for r in pending] == ["first", "second", "third", "fourth"]
        assert [r.call_id for r in pending.answered_by_runtime()] == ["second", "fourth"]
        turn = await scheduler.complete_turn(pending)
    assert [r.call_id for r in turn.responses] == ["first", "second", "third", "fourth"]
    assert [r.status for r in turn.responses] == ["success", "skipped", "success", "skipped"]


async def test_a_turn_nothing_executed_is_completed_from_its_responses(tmp_path: Path) -> None:
    """A runtime that answered every call itself completes the responses as they are."""
    async with ToolScheduler(_registry(), SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        pending = PendingTurn()
        pending.add(_skipped("only", 0), ordinal=0)
        turn = await scheduler.complete_turn(pending)
        again = await scheduler.complete_turn([_skipped("other", 0)])
    assert [r.status for r in turn.responses] == ["skipped"]
    assert [r.call_id for r in again.responses] == ["other"]


def test_ordinals_must_match_the_responses() -> None:
    """One ordinal per response, or a clear error naming both counts."""
    with pytest.raises(ValueError, match="ordinals has 2 entries for 1 responses"):
        PendingTurn([_skipped("x", 0)], ordinals=[0, 1])


@tool(output_threshold=None)
async def lines(n: int) -> str:
    """``n`` numbered lines (no generic persistence: the finalizer cuts what is over)."""
    return "".join(f"line {i}\n" for i in range(n))


@tool
async def broken(message: str) -> str:
    """Fails with ``message``."""
    raise RuntimeError(message)


_CALLS = st.one_of(
    st.builds(lambda text: ("echo", {"text": text}), st.text(max_size=60)),
    st.builds(lambda n: ("lines", {"n": n}), st.integers(0, 400)),
    st.builds(lambda text: ("broken", {"message": text}), st.text(max_size=20)),
    st.just(("missing", {})),
    st.just(("echo", {"text": 3})),  # invalid arguments
)


async def _both_ways(
    root: Path, batch: list[ToolCall], budget: int | None
) -> tuple[list[Turn], list[dict[str, object]]]:
    """The turns and recorded lines of ``batch`` through ``run_batch``, then through
    ``execute`` and ``complete_turn``, on one scheduler (one store: the same artifacts)."""
    log = root / "session.jsonl"
    config = SchedulerConfig(
        artifacts_dir=root / "artifacts", batch_budget=budget, recorder=JsonlRecorder(log)
    )
    async with ToolScheduler(Registry([echo, lines, broken]), config) as scheduler:
        whole = await scheduler.run_batch(batch)
        split = await scheduler.complete_turn(await scheduler.execute(batch))
    recorded = [json.loads(line) for line in log.read_text().splitlines()]
    for line in recorded:
        del line["seq"]  # the one field that tells the two lines apart
    return [whole, split], recorded


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(_CALLS, min_size=1, max_size=4),
    ids=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=4, max_size=4),
    budget=st.one_of(st.none(), st.integers(1, 3_000)),
)
def test_run_batch_gives_the_turn_execute_then_complete_turn_gives(
    tmp_path_factory: pytest.TempPathFactory,
    calls: list[tuple[str, dict[str, object]]],
    ids: list[str],
    budget: int | None,
) -> None:
    """``run_batch`` (which completes an untraced turn without a ``PendingTurn``) returns
    and records exactly what ``execute`` then ``complete_turn`` do: same responses, parts,
    cuts and artifacts, for results that fit, are cut, fail or are answered in place."""
    batch = [
        ToolCall(id=call_id, name=name, args=args)
        for call_id, (name, args) in zip(ids, calls, strict=False)
    ]
    root = tmp_path_factory.mktemp("both")
    (whole, split), (whole_log, split_log) = anyio.run(_both_ways, root, batch, budget)
    assert whole == split
    assert whole_log == split_log
