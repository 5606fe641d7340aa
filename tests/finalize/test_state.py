"""The finalizer's internal metadata: carried on the response, never serialized."""

from __future__ import annotations

import json

import toolbatch.finalize
from tests.finalize._support import response
from toolbatch import ToolCallResponse, Turn
from toolbatch.finalize import finalize_tool_responses


async def test_finalize_state_is_never_serialized() -> None:
    """Dumps, JSON and a rebuilt response leave the state (and the source excerpt) out."""
    secret_tail = "SECRET-TAIL-" * 10
    [item] = await finalize_tool_responses([response("a", "x" * 10_000 + secret_tail)], budget=500)
    assert item.finalize_state is not None
    assert "finalize_state" not in item.model_dump()
    assert "finalize_state" not in item.model_dump(by_alias=True, mode="json")
    as_json = item.model_dump_json()
    assert "finalize_state" not in as_json
    assert "excerpt" not in as_json
    assert "finalize_state" not in repr(item)
    turn = Turn(responses=[item], parts=item.parts)
    assert "finalize_state" not in turn.model_dump_json()
    rebuilt = ToolCallResponse.model_validate_json(as_json)
    assert rebuilt.finalize_state is None
    assert json.loads(as_json)["parts"] == json.loads(rebuilt.model_dump_json())["parts"]


async def test_with_parts_keeps_the_state_and_from_result_starts_without() -> None:
    """A copy with the same parts keeps shrinking cleanly; a fresh response has no state."""
    [item] = await finalize_tool_responses([response("a", "y" * 10_000)], budget=900)
    copy = item.with_parts(list(item.parts))
    assert copy.finalize_state == item.finalize_state
    [smaller] = await finalize_tool_responses([copy], budget=300)
    part_output = smaller.parts[0].function_response.response["output"]  # type: ignore[union-attr]
    assert part_output.count("Tool output truncated.") == 1
    assert response("b", "z").finalize_state is None


def test_the_public_surface_holds_the_contract_names() -> None:
    """toolbatch.finalize exports what other layers rely on."""
    for name in (
        "DEFAULT_BATCH_BUDGET_CHARS",
        "DEFAULT_LIFECYCLE_TOOLS",
        "enforce_send_budget",
        "finalize_tool_responses",
        "response_text_length",
    ):
        assert name in toolbatch.finalize.__all__
    assert toolbatch.finalize.DEFAULT_BATCH_BUDGET_CHARS == 200_000
