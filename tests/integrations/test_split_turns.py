"""The calls a framework starts together run as one batch, whoever of them is cancelled."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
from hypothesis import given, settings, strategies as st
from pydantic import JsonValue

from tests.strategies import response_batches, scaled, text_parts
from toolbatch import (
    Registry,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
    tool,
)
from toolbatch.integrations._turns import SplitTurns, make_call, turn_texts
from toolbatch.providers import openai_chat


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


async def test_a_whole_turn_arriving_out_of_order_runs_in_the_models_order(tmp_path: Path) -> None:
    """Calls of one model response that arrive in another order run, and are answered, in
    the model's order, as one completed turn."""
    started: list[int] = []

    @tool
    async def note(n: int) -> str:
        """Note a number."""
        started.append(n)
        return f"n{n}"

    config = SchedulerConfig(artifacts_dir=tmp_path, concurrency=1)
    async with ToolScheduler(Registry([note]), config) as s:
        turns = SplitTurns(s)
        wanted = ("c0", "c1", "c2")
        texts: dict[int, str] = {}

        async def run(index: int) -> None:
            call = ToolCall(id=f"c{index}", name="note", args={"n": index})
            texts[index] = (await turns.answer(call, turn=wanted)).text

        async with anyio.create_task_group() as group:
            for index in (2, 0, 1):
                group.start_soon(run, index)
        assert started == [0, 1, 2]
        assert texts == {0: "n0", 1: "n1", 2: "n2"}
        assert not any(turns.is_pending(call_id) for call_id in wanted)  # completed at once


_json_values: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
_not_json = st.sampled_from([(1, 2), b"x", {1, 2}, object(), {1: "a"}])


@settings(max_examples=scaled(200))
@given(
    args=st.dictionaries(st.text(max_size=5), _json_values, max_size=4),
    bad=st.one_of(st.none(), _not_json),
    nested=st.booleans(),
)
def test_a_framework_call_is_the_validated_call_and_bad_arguments_make_it_invalid(
    args: dict[str, JsonValue], bad: object, nested: bool
) -> None:
    """Arguments of JSON values make the call validation makes of them (flat ones are taken
    as they are); a value that is not JSON, at any depth, makes an invalid call the
    scheduler answers in its place."""
    if bad is None:
        call = make_call("c1", "add", args, 3)
        assert call == ToolCall.model_validate(
            {"id": "c1", "name": "add", "args": args, "ordinal": 3}
        )
        return
    args = {**args, "bad": [bad] if nested else bad}
    call = make_call("c1", "add", args, 3)
    assert call.invalid is not None
    assert (call.id, call.name, call.ordinal) == ("c1", "add", 3)


@settings(max_examples=scaled(200))
@given(responses=response_batches(max_size=6), own=st.lists(text_parts(), max_size=2))
def test_each_call_gets_the_text_the_chat_mapping_sends(
    responses: list[ToolCallResponse], own: list[TextPart]
) -> None:
    """The text of each call of a turn is its tool message's content under the Chat
    Completions mapping (media references and errors included), whatever the turn holds."""
    turn = Turn(
        responses=responses,
        parts=[*(part for response in responses for part in response.parts), *own],
    )
    texts, context = turn_texts(turn)
    assert texts == {
        message["tool_call_id"]: message["content"]
        for message in openai_chat.tool_results(turn)
        if message["role"] == "tool"
    }
    assert context == "\n\n".join(part.text for part in own if part.text)
