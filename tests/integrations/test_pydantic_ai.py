"""ToolbatchToolset in pydantic-ai's own agent loop, driven by its FunctionModel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integrations._support import (
    BIG_COMMAND,
    BUDGET,
    INTEGRATIONS,
    SMALL_COMMAND,
    alive,
    check_bounded,
    pid_command,
    requires,
    wait_for_pid,
)
from tests.telemetry._support import Recorded
from toolbatch import JsonlRecorder, SchedulerConfig, load_session, telemetry
from toolbatch.hooks import PostToolBatchOutput

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo

# pydantic-ai (1 s of CPU) and toolbatch's module over it are imported where a test runs.
pytestmark = [INTEGRATIONS, requires("pydantic_ai")]


class ScriptedFunction:
    """A FunctionModel function: one scripted response per request, every request kept."""

    def __init__(self, *responses: ModelResponse) -> None:
        self.responses = list(responses)
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        self.requests.append(list(messages))
        return self.responses.pop(0)


def _shell_calls(*commands: str) -> ModelResponse:
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    return ModelResponse(
        parts=[
            ToolCallPart("run_shell_command", {"command": command}, tool_call_id=f"c{index}")
            for index, command in enumerate(commands)
        ]
    )


def _returns(request: list[ModelMessage]) -> list[ToolReturnPart]:
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    last = request[-1]
    assert isinstance(last, ModelRequest)
    return [part for part in last.parts if isinstance(part, ToolReturnPart)]


async def test_a_turn_of_three_calls_reaches_the_model_bounded_in_order(tmp_path: Path) -> None:
    """The next request's tool returns fit the budget, name their artifacts, keep their ids."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    script = ScriptedFunction(
        _shell_calls(BIG_COMMAND, SMALL_COMMAND, BIG_COMMAND, BIG_COMMAND),
        _shell_calls(SMALL_COMMAND),
        ModelResponse(parts=[TextPart("done")]),
    )
    record = tmp_path / "turns.jsonl"
    ts = ToolbatchToolset(
        SchedulerConfig(
            batch_budget=BUDGET, artifacts_dir=tmp_path / "art", recorder=JsonlRecorder(record)
        )
    )
    agent = Agent(FunctionModel(script), toolsets=[ts], capabilities=[ts.capability])
    result = await agent.run("go")
    assert result.output == "done"
    assert len(script.requests) == 3
    returns = _returns(script.requests[1])
    assert [part.tool_call_id for part in returns] == ["c0", "c1", "c2", "c3"]
    texts = [str(part.content) for part in returns]
    assert len(check_bounded(texts)) == 3
    assert texts[1].startswith("small")
    # The later request carries the same bounded first turn, and the second turn whole.
    later = [
        part
        for message in script.requests[2]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert [str(part.content) for part in later[:4]] == texts
    assert [turn.responses[0].call_id for turn in load_session(record)] == ["c0", "c0"]


async def test_hook_context_is_its_own_part_after_the_returns(tmp_path: Path) -> None:
    """A PostToolBatch hook's context reaches the model as a user prompt part, bounded too."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    async def hook(batch: object) -> PostToolBatchOutput:
        del batch
        return PostToolBatchOutput(additional_context="remember the tests")

    script = ScriptedFunction(
        _shell_calls(SMALL_COMMAND, SMALL_COMMAND, SMALL_COMMAND),
        ModelResponse(parts=[TextPart("done")]),
    )
    ts = ToolbatchToolset(SchedulerConfig(artifacts_dir=tmp_path, hooks=[hook]))
    agent = Agent(FunctionModel(script), toolsets=[ts], capabilities=[ts.capability])
    await agent.run("go")
    last = script.requests[1][-1]
    assert isinstance(last, ModelRequest)
    kinds = [type(part).__name__ for part in last.parts]
    assert kinds == ["ToolReturnPart"] * 3 + ["UserPromptPart"]
    assert isinstance(last.parts[-1], UserPromptPart)
    assert "remember the tests" in str(last.parts[-1].content)


async def test_a_model_response_is_one_batch_and_one_turn_span(tmp_path: Path) -> None:
    """The calls pydantic-ai starts together run as one toolbatch batch: telemetry shows one
    turn with every call's span under it, not a turn per call."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    recorded = Recorded()
    telemetry.configure(
        tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider
    )
    try:
        script = ScriptedFunction(
            _shell_calls(SMALL_COMMAND, SMALL_COMMAND, SMALL_COMMAND),
            ModelResponse(parts=[TextPart("done")]),
        )
        ts = ToolbatchToolset(SchedulerConfig(artifacts_dir=tmp_path))
        agent = Agent(FunctionModel(script), toolsets=[ts], capabilities=[ts.capability])
        assert (await agent.run("go")).output == "done"
        turn = recorded.one("toolbatch.turn")
        assert sorted(recorded.call_spans()) == ["c0", "c1", "c2"]
        assert all(span.parent is not None for span in recorded.call_spans().values())
        assert {span.parent.span_id for span in recorded.call_spans().values() if span.parent} == {
            turn.context.span_id
        }
    finally:
        telemetry.configure()
        recorded.shutdown()


async def test_cancelling_the_run_kills_the_running_commands(tmp_path: Path) -> None:
    """A cancelled agent run leaves no command running."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    pid_files = [tmp_path / f"pid{index}" for index in range(3)]
    script = ScriptedFunction(_shell_calls(*(pid_command(path) for path in pid_files)))
    ts = ToolbatchToolset(SchedulerConfig(artifacts_dir=tmp_path / "art"))
    agent = Agent(FunctionModel(script), toolsets=[ts], capabilities=[ts.capability])
    run = asyncio.ensure_future(agent.run("go"))  # noqa: TID251  (what a pydantic-ai caller does)
    pids = [await wait_for_pid(path) for path in pid_files]
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not [pid for pid in pids if alive(pid)]


async def test_the_toolset_alone_bounds_and_records_the_turn(tmp_path: Path) -> None:
    """Without the history processor, a response's calls are still one bounded, recorded
    turn, and a PostToolBatch hook's context follows the returns as a user prompt part."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    async def hook(batch: object) -> PostToolBatchOutput:
        del batch
        return PostToolBatchOutput(additional_context="remember the tests")

    script = ScriptedFunction(
        _shell_calls(BIG_COMMAND, SMALL_COMMAND, BIG_COMMAND, BIG_COMMAND),
        ModelResponse(parts=[TextPart("done")]),
    )
    record = tmp_path / "turns.jsonl"
    config = SchedulerConfig(
        batch_budget=BUDGET,
        artifacts_dir=tmp_path / "art",
        hooks=[hook],
        recorder=JsonlRecorder(record),
    )
    ts = ToolbatchToolset(config)
    assert (await Agent(FunctionModel(script), toolsets=[ts]).run("go")).output == "done"
    last = script.requests[1][-1]
    assert isinstance(last, ModelRequest)
    assert [type(part).__name__ for part in last.parts] == ["ToolReturnPart"] * 4 + [
        "UserPromptPart"
    ]
    assert isinstance(last.parts[-1], UserPromptPart)
    assert "remember the tests" in str(last.parts[-1].content)
    returns = _returns(script.requests[1])
    assert [part.tool_call_id for part in returns] == ["c0", "c1", "c2", "c3"]
    texts = [str(part.content) for part in returns]
    assert len(check_bounded(texts)) == 3
    [turn] = load_session(record)
    assert [response.call_id for response in turn.responses] == ["c0", "c1", "c2", "c3"]


@pytest.mark.parametrize(
    "processed",
    [
        pytest.param(True, id="with the history processor: one turn"),
        pytest.param(False, id="without it: a turn per call"),
    ],
)
async def test_calls_run_one_at_a_time_reach_the_model_as_recorded(
    tmp_path: Path, processed: bool
) -> None:
    """Calls pydantic-ai runs one at a time are bounded (the history processor completes them
    together and cuts them, each cut naming its file), and what is recorded is what is sent."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from toolbatch.integrations._turns import turn_texts
    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    script = ScriptedFunction(
        _shell_calls(BIG_COMMAND, BIG_COMMAND, SMALL_COMMAND),
        ModelResponse(parts=[TextPart("done")]),
    )
    record = tmp_path / "turns.jsonl"
    ts = ToolbatchToolset(
        SchedulerConfig(
            batch_budget=BUDGET, artifacts_dir=tmp_path / "art", recorder=JsonlRecorder(record)
        )
    )
    agent = Agent(
        FunctionModel(script), toolsets=[ts], capabilities=[ts.capability] if processed else []
    )
    with Agent.parallel_tool_call_execution_mode("sequential"):
        assert (await agent.run("go")).output == "done"
    sent = {part.tool_call_id: str(part.content) for part in _returns(script.requests[1])}
    assert list(sent) == ["c0", "c1", "c2"]
    turns = load_session(record)
    assert [len(turn.responses) for turn in turns] == ([3] if processed else [1, 1, 1])
    recorded = {
        call_id: text for turn in turns for call_id, text in turn_texts(turn.parts)[0].items()
    }
    assert recorded == sent
    if processed:
        assert len(check_bounded(list(sent.values()))) == 2
    else:
        for text in sent.values():
            check_bounded([text])
