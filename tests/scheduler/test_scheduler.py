"""ToolScheduler.run_batch: concurrent, ordered, bounded, and never raising on bad input."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.strategies import scaled
from toolbatch import (
    ArtifactStore,
    FunctionResponsePart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.errors import ConfigError
from toolbatch.finalize import response_text_length
from toolbatch.hooks import PostToolBatchInput, PostToolBatchOutput
from toolbatch.producers import ProducerContext, ToolDeclaration, tool
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler


@tool
async def echo(text: str, delay: float = 0.0) -> str:
    """Return the text after an optional delay."""
    await anyio.sleep(delay)
    return text


@tool
def boom(message: str = "kaput") -> str:
    """Always raises."""
    raise ValueError(message)


def _registry(*extra: object) -> Registry:
    return Registry([echo, boom, *extra])


def _output(response: ToolCallResponse) -> object:
    part = response.parts[0]
    assert isinstance(part, FunctionResponsePart)
    return part.function_response.response


def _config(tmp_path: Path, **options: Any) -> SchedulerConfig:
    return SchedulerConfig(artifacts_dir=tmp_path / "artifacts", **options)


@settings(
    max_examples=scaled(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(delays=st.lists(st.sampled_from([0.0, 0.001, 0.003, 0.006]), min_size=1, max_size=12))
async def test_responses_come_back_in_call_order_whatever_finishes_first(
    tmp_path: Path, delays: list[float]
) -> None:
    """Whatever the completion order, responses and parts follow the model's order."""
    calls = [
        ToolCall(id=f"c{i}", name="echo", args={"text": f"out-{i}", "delay": d})
        for i, d in enumerate(delays)
    ]
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert [r.call_id for r in turn.responses] == [c.id for c in calls]
    assert [_output(r) for r in turn.responses] == [
        {"output": f"out-{i}"} for i in range(len(calls))
    ]
    assert turn.parts == [p for r in turn.responses for p in r.parts]


async def test_ordinals_decide_the_order_not_the_list_position(tmp_path: Path) -> None:
    """Calls carrying ordinals are answered in ordinal order."""
    calls = [
        ToolCall(id="b", name="echo", args={"text": "b"}, ordinal=1),
        ToolCall(id="a", name="echo", args={"text": "a"}, ordinal=0),
    ]
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert [r.call_id for r in turn.responses] == ["a", "b"]


async def test_100_calls_under_a_limit_of_10(tmp_path: Path) -> None:
    """100 calls all answer, and never more than 10 run at once."""
    running = 0
    peak = 0

    @tool
    async def gauge(i: int) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.005)
        running -= 1
        return str(i)

    calls = [ToolCall(id=f"g{i}", name="gauge", args={"i": i}) for i in range(100)]
    async with ToolScheduler(Registry([gauge]), _config(tmp_path, concurrency=10)) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert peak == 10
    assert [_output(r) for r in turn.responses] == [{"output": str(i)} for i in range(100)]


async def test_bad_input_of_every_kind_becomes_error_responses_in_place(tmp_path: Path) -> None:
    """Unknown tool, invalid args, duplicate id, raising tool, malformed call: all answered."""
    calls: list[Any] = [
        ToolCall(id="ok", name="echo", args={"text": "fine"}),
        ToolCall(id="u", name="no_such_tool"),
        ToolCall(id="v", name="echo", args={"text": 5}),
        ToolCall(id="ok", name="echo", args={"text": "again"}),
        ToolCall(id="r", name="boom", args={"message": "disk on fire"}),
        {"id": "m", "args": "not an object"},
        "garbage",
    ]
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch(calls)
    by_position = turn.responses
    assert len(by_position) == 7
    assert by_position[0].status == "success"
    assert by_position[1].error_type == "unknown_tool"
    assert "no_such_tool" in (by_position[1].error or "")
    assert "echo" in (by_position[1].error or "")
    assert by_position[2].error_type == "invalid_args"
    assert by_position[3].status == "duplicate"
    assert by_position[4].error_type == "tool_crashed"
    assert "disk on fire" in (by_position[4].error or "")
    assert by_position[5].error_type == "invalid_call"
    assert by_position[5].call_id == "m"
    assert by_position[6].error_type == "invalid_call"
    for response in by_position[1:]:
        assert response.status != "success"
        assert response.error


async def test_a_producer_that_outlives_the_ceiling_is_cut_off(tmp_path: Path) -> None:
    """A custom producer ignoring its timeout is stopped by the scheduler's backstop."""

    class Stubborn:
        declaration = ToolDeclaration(name="stubborn")

        async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
            await anyio.sleep(3600)
            return ToolResult(content="never")

    config = _config(tmp_path, call_timeout=0.1)
    import toolbatch.scheduler._execution as module

    original = module.BACKSTOP_GRACE_S
    module.BACKSTOP_GRACE_S = 0.1
    try:
        async with ToolScheduler(Registry([Stubborn()]), config) as scheduler:
            with anyio.fail_after(5):
                turn = await scheduler.run_batch([ToolCall(id="s", name="stubborn")])
    finally:
        module.BACKSTOP_GRACE_S = original
    [response] = turn.responses
    assert response.error_type == "timeout"


async def test_producer_returning_the_wrong_type_is_an_error(tmp_path: Path) -> None:
    """A producer returning something other than a ToolResult gets a clear error."""

    class Sloppy:
        declaration = ToolDeclaration(name="sloppy")

        async def run(self, call: ToolCall, context: ProducerContext) -> Any:
            return "just a string"

    async with ToolScheduler(Registry([Sloppy()]), _config(tmp_path)) as scheduler:
        [response] = (await scheduler.run_batch([ToolCall(id="s", name="sloppy")])).responses
    assert response.error_type == "tool_crashed"
    assert "str" in (response.error or "")


async def test_batch_fits_the_budget_and_large_output_is_persisted_once(tmp_path: Path) -> None:
    """Three big outputs under a 10,000 budget: total within budget, each persisted once."""

    @tool(output_threshold=None)
    async def big(n: int) -> str:
        return "".join(f"{n}:{i}\n" for i in range(5_000))

    store = ArtifactStore(tmp_path / "store")
    config = SchedulerConfig(store=store, batch_budget=10_000)
    calls = [ToolCall(id=f"b{n}", name="big", args={"n": n}) for n in range(3)]
    async with ToolScheduler(Registry([big]), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert response_text_length(turn.parts) <= 10_000
    assert len(store.written) == 3
    for response in turn.responses:
        [path] = response.persisted_output_files or ()
        assert str(path) in json.dumps(_output(response))


async def test_generic_threshold_persists_a_custom_tools_output(tmp_path: Path) -> None:
    """A custom tool over its output_threshold gets a preview naming the written file."""

    @tool(output_threshold=1_000)
    async def chatty() -> str:
        return "word " * 1_000

    async with ToolScheduler(Registry([chatty]), _config(tmp_path)) as scheduler:
        [response] = (await scheduler.run_batch([ToolCall(id="c", name="chatty")])).responses
    [path] = response.persisted_output_files or ()
    assert path.read_text() == "word " * 1_000
    assert str(path) in str(_output(response))
    assert response.content_length < 2_500


async def test_hooks_see_bounded_input_and_their_output_is_bounded(tmp_path: Path) -> None:
    """The hook sees the finalized batch; its huge context is bounded by the second pass."""
    seen: list[int] = []

    async def hook(batch: PostToolBatchInput) -> PostToolBatchOutput:
        total = 0
        for call in batch.tool_calls:
            total += call.tool_response.content_length
        seen.append(total)
        return PostToolBatchOutput(additional_context="C" * 50_000)

    @tool(output_threshold=None)
    async def big() -> str:
        return "x" * 40_000

    config = _config(tmp_path, batch_budget=5_000, hooks=[hook])
    async with ToolScheduler(Registry([big]), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="b", name="big")])
    assert seen == [5_000]
    assert response_text_length(turn.parts) <= 5_000


async def test_a_stopping_hook_keeps_every_result_and_says_why(tmp_path: Path) -> None:
    """A stop keeps both results, adds the reason as the turn's last part, sets stop_reason."""

    async def stop(batch: PostToolBatchInput) -> PostToolBatchOutput:
        return PostToolBatchOutput(stop=True, stop_reason="review needed")

    calls = [
        ToolCall(id="a", name="echo", args={"text": "1"}),
        ToolCall(id="b", name="echo", args={"text": "2"}),
    ]
    async with ToolScheduler(_registry(), _config(tmp_path, hooks=[stop])) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert _output(turn.responses[0]) == {"output": "1"}
    assert _output(turn.responses[1]) == {"output": "2"}
    assert turn.stop_reason == "review needed"
    [note] = turn.context_parts
    assert isinstance(note, TextPart)
    assert note.text.endswith("review needed")
    assert turn.parts[-1] is note


async def test_failing_hooks_leave_the_batch_unchanged(tmp_path: Path) -> None:
    """Crashing and hanging hooks are ignored; the batch is as it was."""

    async def crash(batch: PostToolBatchInput) -> PostToolBatchOutput:
        raise RuntimeError("bug in hook")

    async def hang(batch: PostToolBatchInput) -> PostToolBatchOutput:
        await anyio.sleep(3600)
        raise AssertionError

    config = _config(tmp_path, hooks=[crash, hang], hook_timeout=0.2)
    async with ToolScheduler(_registry(), config) as scheduler:
        with anyio.fail_after(5):
            turn = await scheduler.run_batch([ToolCall(id="a", name="echo", args={"text": "x"})])
    assert _output(turn.responses[0]) == {"output": "x"}


async def test_abort_answers_every_call_with_cancelled(tmp_path: Path) -> None:
    """Setting abort mid-batch cancels the running calls; each gets a cancelled response."""
    started = anyio.Event()

    @tool
    async def wait_forever(i: int) -> str:
        started.set()
        await anyio.sleep(3600)
        return "never"

    abort = anyio.Event()
    calls = [ToolCall(id="fast", name="echo", args={"text": "done"})] + [
        ToolCall(id=f"w{i}", name="wait_forever", args={"i": i}) for i in range(15)
    ]

    async def trigger() -> None:
        await started.wait()
        abort.set()

    async with (
        ToolScheduler(_registry(wait_forever), _config(tmp_path)) as scheduler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(trigger)
        with anyio.fail_after(10):
            turn = await scheduler.run_batch(calls, abort=abort)
    assert len(turn.responses) == 16
    assert turn.responses[0].status == "success"
    assert {r.status for r in turn.responses[1:]} == {"cancelled"}


async def test_observer_sees_each_call_start_and_finish(tmp_path: Path) -> None:
    """An observer gets started/finished events; a crashing observer breaks nothing."""
    events: list[tuple[str, str]] = []

    class Observer:
        def call_started(self, call: ToolCall) -> None:
            events.append(("started", call.id))

        def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
            events.append(("finished", call.id))
            raise RuntimeError("observer bug")

    calls = [ToolCall(id=f"c{i}", name="echo", args={"text": "x"}) for i in range(3)]
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch(calls, observer=Observer())
    assert sorted(events) == sorted(
        [("started", f"c{i}") for i in range(3)] + [("finished", f"c{i}") for i in range(3)]
    )
    assert all(r.status == "success" for r in turn.responses)


async def test_rejected_approval_becomes_an_error_the_model_sees(tmp_path: Path) -> None:
    """A tool needing permission that the user rejects is answered with permission_denied."""

    @tool(needs_permission=True)
    async def deploy() -> str:
        raise AssertionError("must not run")

    async def deny(call: ToolCall, declaration: ToolDeclaration) -> bool:
        return False

    async with ToolScheduler(Registry([deploy]), _config(tmp_path)) as scheduler:
        [response] = (
            await scheduler.run_batch([ToolCall(id="d", name="deploy")], approve=deny)
        ).responses
    assert response.error_type == "permission_denied"


async def test_run_batch_needs_an_open_scheduler(tmp_path: Path) -> None:
    """Calling run_batch outside `async with` is a clear error."""
    scheduler = ToolScheduler(_registry(), _config(tmp_path))
    with pytest.raises(RuntimeError, match="open the scheduler first"):
        await scheduler.run_batch([])


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"batch_budget": "big"}, id="budget-str"),
        pytest.param({"batch_budget": True}, id="budget-bool"),
        pytest.param({"concurrency": 0}, id="concurrency-0"),
        pytest.param({"call_timeout": -1}, id="timeout-negative"),
        pytest.param({"hook_timeout": float("nan")}, id="hook-timeout-nan"),
        pytest.param({"hooks": ["not callable"]}, id="hook-not-callable"),
        pytest.param({"recorder": object()}, id="recorder-without-record-turn"),
    ],
)
def test_bad_config_is_a_clear_config_error(options: dict[str, Any]) -> None:
    """Each bad option raises ConfigError naming it."""
    with pytest.raises(ConfigError, match=next(iter(options))):
        SchedulerConfig(**options)


async def test_empty_batch_is_an_empty_turn(tmp_path: Path) -> None:
    """No calls: no responses, no parts."""
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch([])
    assert turn.responses == []
    assert turn.parts == []


async def test_a_configured_lifecycle_tool_survives_every_pass(tmp_path: Path) -> None:
    """A configured lifecycle tool's output stays whole through finalize and the guard."""
    policy = "<policy>Review mode is on. " + "Only read. " * 300 + "</policy>"

    @tool(name="enter_review_mode", output_threshold=None)
    async def enter_review_mode() -> str:
        return policy

    config = _config(tmp_path, batch_budget=200, lifecycle_tools={"enter_review_mode"})
    async with ToolScheduler(Registry([enter_review_mode]), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="p", name="enter_review_mode")])
    assert _output(turn.responses[0]) == {"output": policy}
    assert len(policy) > 200


async def test_progress_reaches_an_observer_that_listens_and_is_not_asked_for_otherwise(
    tmp_path: Path,
) -> None:
    """With an observer taking progress, a producer's reports reach it; without one, the
    producer gets the context's default callback, so it can skip progress altogether (the
    MCP producer then asks its server for none)."""
    from toolbatch.producers import UNWATCHED_PROGRESS

    seen: list[bool] = []

    class Reports:
        declaration = ToolDeclaration(name="reports")

        async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
            seen.append(context.progress is UNWATCHED_PROGRESS)
            context.progress("half way")
            return ToolResult(content="done")

    class Listens:
        def __init__(self) -> None:
            self.messages: list[tuple[str, str]] = []

        def call_progress(self, call: ToolCall, message: str) -> None:
            self.messages.append((call.id, message))

    class Deaf:
        def call_finished(self, call: ToolCall, response: object) -> None:
            del call, response

    listening = Listens()
    async with ToolScheduler(Registry([Reports()]), _config(tmp_path)) as scheduler:
        await scheduler.run_batch([ToolCall(id="a", name="reports")], observer=listening)
        await scheduler.run_batch([ToolCall(id="b", name="reports")], observer=Deaf())
        turn = await scheduler.run_batch([ToolCall(id="c", name="reports")])
    assert listening.messages == [("a", "half way")]
    assert seen == [False, True, True]
    assert turn.responses[0].status == "success"


async def test_an_aborted_sync_tool_sees_its_context_cancelled(tmp_path: Path) -> None:
    """A sync tool polling ``context.cancelled`` in its thread sees the user's abort."""
    started, saw_cancel = threading.Event(), threading.Event()

    @tool(output_threshold=None)
    def poll(context: ProducerContext) -> str:
        """Wait for the abort."""
        started.set()
        if _poll(context):
            saw_cancel.set()
        return "done"

    abort = anyio.Event()

    async def press_abort() -> None:
        await anyio.to_thread.run_sync(started.wait, 10.0)
        abort.set()

    config = SchedulerConfig(artifacts_dir=tmp_path)
    async with ToolScheduler(Registry([poll]), config) as s, anyio.create_task_group() as tg:
        tg.start_soon(press_abort)
        turn = await s.run_batch([ToolCall(id="p", name="poll")], abort=abort)
    assert turn.responses[0].status == "cancelled"
    assert await anyio.to_thread.run_sync(saw_cancel.wait, 10.0)


def _poll(context: ProducerContext) -> bool:
    """Whether ``context.cancelled`` is set within 10 s, polled as a blocking tool would."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if context.cancelled.is_set():
            return True
        time.sleep(0.002)
    return False
