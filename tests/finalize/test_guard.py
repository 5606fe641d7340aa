"""The send guard: synchronous, no I/O, function-response text only, normally a no-op."""

from __future__ import annotations

import math

import pytest
import structlog

from tests.finalize._support import response, slot_strings
from toolbatch import (
    ConfigError,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    TextPart,
)
from toolbatch.finalize import TRUNCATION_HEADER, enforce_send_budget, finalize_tool_responses


def tool_parts(*texts: str) -> list[Part]:
    return [part for i, text in enumerate(texts) for part in response(f"c{i}", text).parts]


def test_a_fitting_batch_returns_the_very_same_list_without_logging() -> None:
    """Normally a no-op: the same list object back and no warning."""
    parts = tool_parts("a" * 100, "b" * 100)
    with structlog.testing.capture_logs() as events:
        assert enforce_send_budget(parts, 200) is parts
    assert events == []


@pytest.mark.parametrize("budget", [None, 0, -1, math.inf])
def test_a_disabled_budget_returns_the_same_list(budget: float | None) -> None:
    """Disabled budgets change nothing."""
    parts = tool_parts("a" * 100_000)
    assert enforce_send_budget(parts, budget) is parts


def test_it_caps_a_tool_message_and_never_touches_media() -> None:
    """Tool output, errors and the batch's top-level text are cut to the budget together
    (they are all one tool-response message); media stays the same object."""
    context = TextPart(text="please also check the tests " * 500)
    image = InlineDataPart(inline_data=InlineData(mime_type="image/png", data="AAAA"))
    failed = FunctionResponsePart(
        function_response=FunctionResponse(id="e", name="t", response={"error": "E" * 9_000})
    )
    parts: list[Part] = [*tool_parts("a" * 9_000), context, failed, image]
    with structlog.testing.capture_logs() as events:
        guarded = enforce_send_budget(parts, 1_000)
    assert guarded is not parts
    assert guarded[3] is image
    assert sum(map(len, slot_strings(guarded))) <= 1_000
    assert all(s.startswith(TRUNCATION_HEADER) for s in slot_strings(guarded))
    [warning] = [e for e in events if e["event"] == "finalize.send_guard_reduced"]
    assert warning["log_level"] == "warning"
    assert warning["before"] == 18_000 + len(context.text)
    assert warning["after"] <= 1_000
    assert "Full output" not in str(guarded)  # no persistence, no paths


def test_the_guard_accepts_any_sequence() -> None:
    """A tuple of parts comes back as a list of the same parts when nothing changes."""
    parts = tuple(tool_parts("a"))
    guarded = enforce_send_budget(parts, 10)
    assert guarded == list(parts)
    assert guarded[0] is parts[0]


def test_a_bad_budget_is_a_config_error() -> None:
    """The guard validates its budget like the finalizer does."""
    with pytest.raises(ConfigError, match="'10'"):
        enforce_send_budget([], "10")  # type: ignore[arg-type]


async def test_a_finalized_batch_passes_the_guard_unchanged() -> None:
    """After the finalizer, the guard has nothing to do."""
    batch = [response("a", "a" * 9_000), response("b", "b" * 9_000)]
    finalized = await finalize_tool_responses(batch, budget=5_000)
    parts = [part for item in finalized for part in item.parts]
    assert enforce_send_budget(parts, 5_000) is parts
