"""Issue 29, item 11: a turn whose record failed leaves no unanswered call behind.

The agent loop talks to a real HTTP fake of Chat Completions that refuses, as the real API
does, a request holding a tool call without its tool message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

import toolbatch
from tests.fake_model_apis import chat_answer, fake_api, unanswered_chat_calls
from toolbatch import JsonlRecorder, Part, ToolCall, Turn, load_session
from toolbatch.agent import AgentLoop, OpenAIChatModel, history_from_transcript
from toolbatch.errors import RecorderError
from toolbatch.recorder import ResponseKind


@toolbatch.tool(read_only=True)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class RefusesOneTurn:
    """A transcript whose first tool-turn record fails (a disk that filled up, then freed)."""

    def __init__(self, path: Path) -> None:
        self.inner = JsonlRecorder(path)
        self.refused = 0

    async def record_turn(self, turn: Turn, *, kinds: Sequence[ResponseKind] | None = None) -> None:
        if not self.refused:
            self.refused += 1
            raise RecorderError("no space left on the device", path=self.inner.path, turn=turn)
        await self.inner.record_turn(turn, kinds=kinds)

    async def record_message(
        self,
        role: Literal["user", "model"],
        parts: Sequence[Part],
        *,
        tool_calls: Sequence[ToolCall] = (),
    ) -> None:
        await self.inner.record_message(role, parts, tool_calls=tool_calls)


async def test_after_a_failed_record_the_next_request_is_one_the_api_accepts(
    tmp_path: Path,
) -> None:
    """The failed turn stays answered in the history, is recorded before the next send,
    and the model's next request carries the call's real result."""
    registry = toolbatch.Registry()
    registry.register(weather)
    transcript = tmp_path / "session.jsonl"
    recorder = RefusesOneTurn(transcript)
    calls = [("call_w", "weather", json.dumps({"city": "Oslo"}))]
    with fake_api(chat_answer(calls), prefix="/v1") as api:
        async with (
            OpenAIChatModel(model="fake", base_url=api.url, api_key="sk-test") as model,
            toolbatch.ToolScheduler(registry, toolbatch.SchedulerConfig()) as scheduler,
        ):
            loop = AgentLoop(model, scheduler, recorder=recorder)
            with pytest.raises(RecorderError) as raised:
                await loop.prompt("weather in Oslo?")
            assert isinstance(raised.value.turn, Turn)
            outcome = await loop.prompt("and now?")
    assert outcome.text == "done: 1 results"
    second = api.requests[-1].body["messages"]
    assert unanswered_chat_calls(second) == []
    [tool_message] = [m for m in second if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "call_w"
    assert "sunny in Oslo" in tool_message["content"]
    # What was sent is what was recorded, in order, and resumes as a valid history.
    kinds = [(e.type, e.role) for e in load_session(transcript)]
    assert kinds == [
        ("message", "user"),
        ("message", "model"),
        ("tool_turn", None),
        ("message", "user"),
        ("message", "model"),
    ]
    resumed = history_from_transcript(transcript)
    assert [m.role for m in resumed] == ["user", "model", "tool", "user", "model"]
