"""The turn object: ``execute`` returns a ``PendingTurn``; ``complete_turn`` takes it once."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbatch import (
    PendingTurn,
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
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
