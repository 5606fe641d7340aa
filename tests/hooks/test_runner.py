"""Running Python hooks and applying their effects to the bounded batch."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from toolbatch import (
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.hooks import (
    PostToolBatchInput,
    PostToolBatchOutput,
    apply_hook_output,
    build_hook_input,
    run_post_tool_batch_hooks,
)


def _response(call_id: str, output: str, **extra: object) -> ToolCallResponse:
    call = ToolCall(id=call_id, name="t")
    return ToolCallResponse.from_result(call, ToolResult(content=output)).model_copy(update=extra)


def test_hook_input_hides_binary_display_and_internal_metadata() -> None:
    """Inline binary becomes a placeholder; display and persisted_output_files never appear;
    tool_input is the call's arguments."""
    image = InlineDataPart.model_validate(
        {"inlineData": {"mimeType": "image/png", "data": "A" * 5000}}
    )
    call = ToolCall(id="c1", name="shot", args={"q": 1})
    response = ToolCallResponse.from_result(
        call,
        ToolResult(
            content=[TextPart(text="see"), image],
            display="D" * 10_000,
            persisted_output_files=(Path("/x/a"),),
        ),
    )
    batch = build_hook_input([response])
    text = batch.model_dump_json()
    assert "AAAA" not in text
    assert "DDDD" not in text
    assert "binary omitted" in text
    assert "persisted_output_files" not in text
    assert "/x/a" not in text
    assert json.loads(text)["tool_calls"][0]["tool_input"] == {"q": 1}


async def test_crashing_and_hanging_hooks_leave_the_batch_unchanged() -> None:
    """A hook that raises and one that hangs past the timeout are both ignored."""

    async def crash(batch: PostToolBatchInput) -> PostToolBatchOutput:
        raise RuntimeError("hook bug")

    async def hang(batch: PostToolBatchInput) -> PostToolBatchOutput:
        await anyio.sleep(60)
        raise AssertionError("unreachable")

    batch = build_hook_input([_response("c", "x")])
    with anyio.fail_after(5):
        answer = await run_post_tool_batch_hooks([crash, hang], batch, timeout_s=0.2)
    assert answer is None


async def test_answers_merge_in_configured_order() -> None:
    """Contexts join in hook order; any stop stops; a dict answer is validated."""

    async def first(batch: PostToolBatchInput) -> PostToolBatchOutput:
        return PostToolBatchOutput(additional_context="one")

    async def second(batch: PostToolBatchInput) -> dict[str, object]:
        return {"additional_context": "two", "stop": True, "stop_reason": "enough"}

    batch = build_hook_input([_response("c", "x")])
    answer = await run_post_tool_batch_hooks([first, second], batch, timeout_s=1)  # type: ignore[list-item]
    assert answer is not None
    assert answer.additional_context == "one\n\ntwo"
    assert answer.stop
    assert answer.stop_reason == "enough"


def test_context_never_touches_a_tool_response() -> None:
    """additional_context comes back as the batch's own text; every response is unchanged."""
    responses = [_response("a", "first"), _response("b", "second")]
    outcome = apply_hook_output(responses, PostToolBatchOutput(additional_context="note"))
    assert all(new is old for new, old in zip(outcome.responses, responses, strict=True))
    assert outcome.context == ["note"]
    assert outcome.stop_reason is None


def test_stop_keeps_every_result_and_reports_the_reason() -> None:
    """A stop changes no response; its reason is a context text and the stop reason."""
    responses = [_response("a", "ok"), _response("b", "big", persisted_output_files=())]
    outcome = apply_hook_output(responses, PostToolBatchOutput(stop=True, stop_reason="policy"))
    assert all(new is old for new, old in zip(outcome.responses, responses, strict=True))
    assert outcome.stop_reason == "policy"
    assert outcome.context[-1].endswith("policy")


def test_replacement_never_inherits_persisted_output_files() -> None:
    """A replacement keeps the original id and drops any persisted_output_files it carries."""
    original = _response("a", "raw", persisted_output_files=(Path("/artifacts/a.txt"),))
    forged = ToolCallResponse(
        call_id="other",
        name="t",
        parts=[TextPart(text="redacted")],
        persisted_output_files=(Path("/etc/passwd"),),
    )
    [out] = apply_hook_output([original], PostToolBatchOutput(replace={"a": forged})).responses
    assert out.call_id == "a"
    assert out.persisted_output_files is None
    assert out.model_dump()["parts"] == [{"text": "redacted"}]


@pytest.mark.parametrize("answer", [None, PostToolBatchOutput()])
def test_no_answer_changes_nothing(answer: PostToolBatchOutput | None) -> None:
    """An empty answer returns the very same response objects and no context."""
    responses = [_response("a", "x")]
    outcome = apply_hook_output(responses, answer)
    assert outcome.responses[0] is responses[0]
    assert outcome.context == []
