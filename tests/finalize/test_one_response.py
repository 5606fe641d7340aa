"""A one-call turn's shortcut: a plain output that fits is finalized as the general pass does."""

from __future__ import annotations

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.strategies import CALL_IDS, TOOL_NAMES, scaled, texts, tool_call_responses
from toolbatch._core import FunctionResponse, FunctionResponsePart, ToolCallResponse
from toolbatch.finalize import DEFAULT_LIFECYCLE_TOOLS, FinalizedTurn, finalize_turn
from toolbatch.finalize._finalizer import DEFAULT_PERSIST_CONCURRENCY, _fit_budget
from toolbatch.finalize._media import DEFAULT_MEDIA_PART_BYTES
from toolbatch.finalize._writer import Writer

_SETTINGS = settings(
    max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_BUDGETS = st.one_of(st.integers(1, 3_000), st.just(200_000))


def _plain(call_id: str, name: str, output: str, status: str) -> ToolCallResponse:
    part = FunctionResponsePart(
        function_response=FunctionResponse(id=call_id, name=name, response={"output": output})
    )
    error = None if status == "success" else f"call ended: {status}"
    return ToolCallResponse(call_id=call_id, name=name, parts=[part], status=status, error=error)


# Half the responses are the shortcut's own shape (one plain output), of every tool name
# (the lifecycle tool's successful output is exempt) and status.
_RESPONSES = st.one_of(
    tool_call_responses(text=texts(max_repeat=300)),
    st.builds(
        _plain,
        st.sampled_from(CALL_IDS),
        st.sampled_from(TOOL_NAMES),
        texts(max_repeat=300),
        st.sampled_from(["success", "error"]),
    ),
)


def _general(response: ToolCallResponse, budget: int) -> FinalizedTurn:
    same = [response]
    writer = Writer(None, same, DEFAULT_PERSIST_CONCURRENCY, 30.0)
    lifecycle = frozenset(DEFAULT_LIFECYCLE_TOOLS)
    return anyio.run(
        lambda: _fit_budget(same, [], writer, budget, lifecycle, DEFAULT_MEDIA_PART_BYTES)
    )


@_SETTINGS
@given(response=_RESPONSES, budget=_BUDGETS)
def test_a_one_response_turn_is_finalized_as_the_general_pass_does(
    response: ToolCallResponse, budget: int
) -> None:
    """Any one response (plain output or not, lifecycle tool or not, fitting or cut): the
    same responses, hook text and measured length as the general pass."""
    fast = anyio.run(lambda: finalize_turn([response], [], budget=budget))
    general = _general(response, budget)
    assert fast.responses == general.responses
    assert fast.hook_text == general.hook_text
    assert fast.length == general.length
    if fast.length is not None:
        assert fast.responses[0] is response  # what fits is never copied
