"""Lifecycle tools: a successful response of one stays inline outside the budget, whatever
its text; everything else (its failures, every other tool) is budgeted."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.finalize._support import budgeted_length, output_of, response
from toolbatch import (
    ConfigError,
    FunctionResponse,
    FunctionResponsePart,
    Registry,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolResult,
    ToolScheduler,
)
from toolbatch.finalize import (
    DEFAULT_LIFECYCLE_TOOLS,
    PLAN_MODE_REENTRY_REMINDER,
    PLAN_MODE_REMINDER,
    TRUNCATION_HEADER,
    enforce_send_budget,
    finalize_tool_responses,
)
from toolbatch.producers import ProducerContext

ANY_TEXT = "plan: " + "step " * 2_000


def plan_mode(output: str, *, call_id: str = "plan") -> ToolCallResponse:
    return response(call_id, output, name="enter_plan_mode")


def test_enter_plan_mode_is_the_default_lifecycle_tool() -> None:
    """The default set names enter_plan_mode; its usual reminders are exported for tools."""
    assert frozenset({"enter_plan_mode"}) == DEFAULT_LIFECYCLE_TOOLS
    for reminder in (PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER):
        assert reminder.startswith("<system-reminder>")
        assert "exit_plan_mode" in reminder


@pytest.mark.parametrize(
    "output",
    [
        pytest.param(PLAN_MODE_REMINDER, id="reminder"),
        pytest.param(PLAN_MODE_REMINDER + "\n\n" + ANY_TEXT, id="reminder-and-more"),
        pytest.param(ANY_TEXT, id="any-text"),
    ],
)
async def test_a_successful_lifecycle_output_stays_whole_whatever_its_text(output: str) -> None:
    """Even a budget far smaller than the output keeps it; the other output is cut to fit."""
    batch = [plan_mode(output), response("shell", "s" * 5_000)]
    finalized = await finalize_tool_responses(batch, budget=100)
    assert output_of(finalized[0]) == output
    assert len(output_of(finalized[1])) <= 100
    assert budgeted_length(finalized) <= 100


async def test_a_failed_lifecycle_call_is_bounded() -> None:
    """A failed enter_plan_mode is cut like any other response."""
    call = ToolCall(id="plan", name="enter_plan_mode")
    failed = ToolCallResponse.from_result(
        call, ToolResult.failure("e" * 5_000, content=PLAN_MODE_REMINDER)
    )
    [finalized] = await finalize_tool_responses([failed], budget=300)
    assert finalized.content_length <= 300


async def test_the_exemption_is_keyed_on_the_tool_not_the_text() -> None:
    """The reminder text returned by another tool is cut; a part named enter_plan_mode
    inside another tool's response is cut too (the response's tool decides)."""
    shell = response("shell", PLAN_MODE_REMINDER * 10)
    smuggled = ToolCallResponse(
        call_id="x",
        name="run_shell_command",
        parts=[
            FunctionResponsePart(
                function_response=FunctionResponse(
                    id="x", name="enter_plan_mode", response={"output": ANY_TEXT}
                )
            )
        ],
    )
    finalized = await finalize_tool_responses([shell, smuggled], budget=200)
    assert budgeted_length(finalized) <= 200
    assert sum(item.content_length for item in finalized) <= 200


async def test_configured_lifecycle_tools_replace_the_defaults() -> None:
    """With {"enter_review_mode"}, that tool is exempt and enter_plan_mode is not."""
    review = response("r", ANY_TEXT, name="enter_review_mode")
    batch = [review, plan_mode(ANY_TEXT)]
    finalized = await finalize_tool_responses(
        batch, budget=200, lifecycle_tools={"enter_review_mode"}
    )
    assert output_of(finalized[0]) == ANY_TEXT
    assert finalized[1].content_length <= 200


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        pytest.param("enter_plan_mode", "got the string", id="bare-string"),
        pytest.param({""}, "non-empty tool names", id="empty-name"),
        pytest.param({3}, "non-empty tool names", id="not-a-string"),
        pytest.param(frozenset({""}), "non-empty tool names", id="frozen-empty-name"),
        pytest.param(5, "collection of tool names", id="not-a-collection"),
    ],
)
async def test_bad_lifecycle_tools_are_config_errors(tools: object, message: str) -> None:
    """The finalizer, the send guard and the config all name the bad value, also right
    after a good set was accepted (which is not checked again)."""
    await finalize_tool_responses([], budget=10, lifecycle_tools=DEFAULT_LIFECYCLE_TOOLS)
    with pytest.raises(ConfigError, match=message):
        await finalize_tool_responses([], budget=10, lifecycle_tools=tools)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        enforce_send_budget([], 10, lifecycle_tools=tools)  # type: ignore[arg-type]


def test_the_send_guard_keeps_a_lifecycle_output_and_bounds_the_rest() -> None:
    """The guard exempts the successful lifecycle output and cuts the rest to the budget."""
    parts = [
        *plan_mode(ANY_TEXT).parts,
        *response("shell", "s" * 5_000).parts,
        TextPart(text="context " * 500),
    ]
    guarded = enforce_send_budget(parts, 300)
    first = guarded[0]
    assert isinstance(first, FunctionResponsePart)
    assert first.function_response.response["output"] == ANY_TEXT
    rest = guarded[1:]
    assert (
        sum(
            len(p.function_response.response["output"])  # type: ignore[arg-type]
            if isinstance(p, FunctionResponsePart)
            else len(p.text)  # type: ignore[union-attr]
            for p in rest
        )
        <= 300
    )
    assert any(
        isinstance(p, FunctionResponsePart)
        and str(p.function_response.response["output"]).startswith(TRUNCATION_HEADER)
        for p in rest
    )


class _PlanModeNamedOtherwise:
    """An ``enter_plan_mode`` tool whose function response part is named ``plan``."""

    declaration = ToolDeclaration(name="enter_plan_mode", description="Enter plan mode.")

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        part = FunctionResponsePart(
            function_response=FunctionResponse(
                id=call.id, name="plan", response={"output": ANY_TEXT}
            )
        )
        return ToolResult(content=[part])


async def test_finalizer_and_send_guard_key_the_exemption_alike(tmp_path: Path) -> None:
    """An enter_plan_mode response whose part is named otherwise is budgeted by the
    finalizer (cut, the whole saved), so the send guard finds nothing left to cut."""
    config = SchedulerConfig(artifacts_dir=tmp_path, batch_budget=500)
    async with ToolScheduler(Registry([_PlanModeNamedOtherwise()]), config) as scheduler:
        with capture_logs() as logs:
            turn = await scheduler.run_batch([ToolCall(id="p", name="enter_plan_mode")])
    assert turn.content_length <= 500
    assert turn.responses[0].persisted_output_files  # the finalizer cut it, keeping the whole
    assert enforce_send_budget(turn.parts, 500) is turn.parts
    assert not [log for log in logs if log["event"] == "finalize.send_guard_reduced"]
