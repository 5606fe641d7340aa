"""The plan-mode exemption: the lifecycle reminder stays inline; everything else is budgeted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.finalize._support import RecordingStore, budgeted_length, output_of, response
from toolbatch import (
    ConfigError,
    FunctionResponse,
    FunctionResponsePart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.finalize import (
    DEFAULT_LIFECYCLE_REMINDERS,
    PLAN_MODE_REENTRY_REMINDER,
    PLAN_MODE_REMINDER,
    TRUNCATION_HEADER,
    enforce_send_budget,
    finalize_tool_responses,
)

HOOK_CONTEXT = "PostToolUse hook context: " + "ctx " * 2_000


def plan_mode(output: str, *, call_id: str = "plan") -> ToolCallResponse:
    return response(call_id, output, name="enter_plan_mode")


def test_the_default_registry_protects_enter_plan_mode_reminders() -> None:
    """Both reminders are registered under enter_plan_mode and read as system reminders."""
    assert DEFAULT_LIFECYCLE_REMINDERS == {
        "enter_plan_mode": (PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER)
    }
    for reminder in (PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER):
        assert reminder.startswith("<system-reminder>")
        assert "exit_plan_mode" in reminder


@pytest.mark.parametrize("reminder", [PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER])
async def test_a_reminder_output_stays_whole_outside_the_budget(reminder: str) -> None:
    """Even a budget smaller than the reminder keeps it; the other output is cut to fit."""
    batch = [plan_mode(reminder), response("shell", "s" * 5_000)]
    finalized = await finalize_tool_responses(batch, budget=100)
    assert finalized[0] is batch[0]
    assert output_of(finalized[0]) == reminder
    assert len(output_of(finalized[1])) <= 100
    assert budgeted_length(finalized) <= 100


async def test_hook_context_after_the_reminder_is_budgeted(tmp_path: Path) -> None:
    """Reminder and blank line kept inline; the hook context after them is cut and persisted."""
    store = RecordingStore(tmp_path)
    batch = [plan_mode(PLAN_MODE_REMINDER + "\n\n" + HOOK_CONTEXT)]
    [item] = await finalize_tool_responses(batch, budget=500, store=store)
    output = output_of(item)
    assert output.startswith(PLAN_MODE_REMINDER + "\n\n" + TRUNCATION_HEADER)
    assert len(output) - len(PLAN_MODE_REMINDER) - 2 <= 500
    [(_, _, persisted)] = store.calls
    assert persisted == HOOK_CONTEXT
    assert item.content_length == len(output)

    # A second, smaller pass keeps the reminder and shortens only the hook part, once.
    [again] = await finalize_tool_responses([item], budget=200, store=store)
    again_output = output_of(again)
    assert again_output.startswith(PLAN_MODE_REMINDER + "\n\n" + TRUNCATION_HEADER)
    assert again_output.count(TRUNCATION_HEADER) == 1
    assert len(again_output) - len(PLAN_MODE_REMINDER) - 2 <= 200
    assert len(store.calls) == 1


@pytest.mark.parametrize(
    "output",
    [
        pytest.param("Entered plan mode. " + "x" * 5_000, id="arbitrary-output"),
        pytest.param(PLAN_MODE_REMINDER + "x" * 5_000, id="reminder-without-blank-line"),
        pytest.param("x" * 5_000 + PLAN_MODE_REMINDER, id="reminder-at-the-end"),
    ],
)
async def test_other_enter_plan_mode_output_is_budgeted(output: str) -> None:
    """Only an exact reminder (or reminder plus blank line) is protected."""
    [item] = await finalize_tool_responses([plan_mode(output)], budget=300)
    assert len(output_of(item)) <= 300


async def test_enter_plan_mode_errors_are_budgeted() -> None:
    """A failed enter_plan_mode is bounded, even when its output holds the reminder."""
    call = ToolCall(id="plan", name="enter_plan_mode")
    failed = ToolCallResponse.from_result(
        call, ToolResult.failure("e" * 5_000, content=PLAN_MODE_REMINDER)
    )
    [item] = await finalize_tool_responses([failed], budget=300)
    assert budgeted_length([item]) <= 300
    part = item.parts[0]
    assert isinstance(part, FunctionResponsePart)
    body = part.function_response.response
    assert isinstance(body["error"], str)
    assert isinstance(body["output"], str)
    assert len(body["error"]) + len(body["output"]) <= 300


async def test_the_function_responses_own_name_decides() -> None:
    """The part's functionResponse.name decides, not the response's tool name."""
    as_plan = FunctionResponsePart(
        function_response=FunctionResponse(
            id="x", name="enter_plan_mode", response={"output": PLAN_MODE_REMINDER}
        )
    )
    disguised = FunctionResponsePart(
        function_response=FunctionResponse(
            id="y", name="run_shell_command", response={"output": PLAN_MODE_REMINDER}
        )
    )
    batch = [
        ToolCallResponse(call_id="x", name="wrapper", parts=[as_plan]),
        ToolCallResponse(call_id="y", name="enter_plan_mode", parts=[disguised]),
    ]
    finalized = await finalize_tool_responses(batch, budget=50)
    assert output_of(finalized[0]) == PLAN_MODE_REMINDER
    assert len(output_of(finalized[1])) <= 50


async def test_custom_reminders_replace_the_defaults() -> None:
    """A custom registry protects its own texts, and only those."""
    policy = "POLICY: read only"
    batch = [
        response("p", policy + "\n\n" + "z" * 3_000, name="enter_review_mode"),
        plan_mode(PLAN_MODE_REMINDER),
    ]
    finalized = await finalize_tool_responses(
        batch, budget=200, lifecycle_reminders={"enter_review_mode": [policy]}
    )
    assert output_of(finalized[0]).startswith(policy + "\n\n" + TRUNCATION_HEADER)
    assert len(output_of(finalized[1])) <= 200


async def test_the_longest_matching_reminder_wins() -> None:
    """When one reminder extends another, the longer one is protected."""
    short, longer = "MODE ON", "MODE ON, strictly"
    batch = [response("p", longer + "\n\n" + "z" * 3_000, name="t")]
    [item] = await finalize_tool_responses(
        batch, budget=100, lifecycle_reminders={"t": (short, longer)}
    )
    assert output_of(item).startswith(longer + "\n\n" + TRUNCATION_HEADER)


@pytest.mark.parametrize(
    ("reminders", "message"),
    [
        pytest.param({"enter_plan_mode": "text"}, "sequence of strings", id="bare-string"),
        pytest.param({"enter_plan_mode": ("",)}, "non-empty string", id="empty-reminder"),
        pytest.param({"enter_plan_mode": (3,)}, "non-empty string", id="not-a-string"),
    ],
)
async def test_a_malformed_registry_is_a_config_error(
    reminders: dict[str, object], message: str
) -> None:
    """Reminder registries are checked, naming the tool and the fix."""
    with pytest.raises(ConfigError, match=message) as caught:
        await finalize_tool_responses(
            [plan_mode("x")],
            budget=10,
            lifecycle_reminders=reminders,  # type: ignore[arg-type]
        )
    assert "'enter_plan_mode'" in str(caught.value)
    with pytest.raises(ConfigError, match=message):
        enforce_send_budget([], 10, lifecycle_reminders=reminders)  # type: ignore[arg-type]


def test_the_send_guard_keeps_the_reminder_and_bounds_the_rest() -> None:
    """Same exemption at the send boundary, decided by the part's own name."""
    parts = [
        *plan_mode(PLAN_MODE_REMINDER + "\n\n" + HOOK_CONTEXT).parts,
        *response("shell", "s" * 5_000).parts,
        TextPart(text="user steering " * 100),
    ]
    guarded = enforce_send_budget(parts, 400)
    first = guarded[0]
    assert isinstance(first, FunctionResponsePart)
    output = first.function_response.response["output"]
    assert isinstance(output, str)
    assert output.startswith(PLAN_MODE_REMINDER + "\n\n" + TRUNCATION_HEADER)
    assert guarded[2] is parts[2]
