"""ToolbatchTools in the Agents SDK's own Runner, driven by a scripted fake Model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.integrations._support import (
    BIG_COMMAND,
    BUDGET,
    INTEGRATIONS,
    SMALL_COMMAND,
    check_bounded,
    pid_command,
    requires,
    wait_dead,
    wait_for_pid,
)
from toolbatch import JsonlRecorder, SchedulerConfig, load_session
from toolbatch.hooks import PostToolBatchOutput

if TYPE_CHECKING:
    from toolbatch.integrations.openai_agents import ToolbatchTools

# The SDK (2 s of CPU) and toolbatch's module over it are imported where a test runs.
pytestmark = [INTEGRATIONS, requires("agents")]


@cache
def _scripted_model_class() -> type[Any]:
    from agents import ModelResponse, Usage
    from agents.models.interface import Model

    class ScriptedModel(Model):
        """An Agents SDK model answering from a script, keeping every input it received."""

        def __init__(self, *outputs: list[Any]) -> None:
            self.outputs = list(outputs)
            self.inputs: list[list[Any]] = []

        async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
            del system_instructions, args, kwargs
            self.inputs.append(list(input) if isinstance(input, list) else [input])
            return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError("the tests run Runner.run, not streamed")

    return ScriptedModel


def scripted_model(*outputs: list[Any]) -> Any:
    """A ScriptedModel answering ``outputs`` (its class, a subclass of the SDK's Model, is
    defined on the first call)."""
    return _scripted_model_class()(*outputs)


def shell_calls(*commands: str, prefix: str = "c") -> list[Any]:
    from openai.types.responses import ResponseFunctionToolCall

    return [
        ResponseFunctionToolCall(
            type="function_call",
            call_id=f"{prefix}{index}",
            name="run_shell_command",
            arguments=json.dumps({"command": command}),
        )
        for index, command in enumerate(commands)
    ]


def answer(text: str) -> list[Any]:
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    return [
        ResponseOutputMessage(
            id="m",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
    ]


def _outputs(items: list[Any]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "function_call_output"]


async def _run(tb: ToolbatchTools, model: Any) -> Any:
    from agents import Agent, RunConfig, Runner

    agent = Agent(name="coder", model=model, tools=tb.tools)
    config = RunConfig(call_model_input_filter=tb.model_input_filter, tracing_disabled=True)
    return await Runner.run(agent, "go", run_config=config)


async def test_a_turn_of_three_calls_reaches_the_model_bounded_in_order(tmp_path: Path) -> None:
    """The next model input's outputs fit the budget, name their artifacts, keep their ids."""
    from toolbatch.integrations.openai_agents import ToolbatchTools

    model = scripted_model(
        shell_calls(BIG_COMMAND, SMALL_COMMAND, BIG_COMMAND, BIG_COMMAND),
        shell_calls(SMALL_COMMAND, prefix="d"),  # the SDK refuses a reused call id
        answer("done"),
    )
    record = tmp_path / "turns.jsonl"
    config = SchedulerConfig(
        batch_budget=BUDGET, artifacts_dir=tmp_path / "art", recorder=JsonlRecorder(record)
    )
    async with ToolbatchTools(config) as tb:
        result = await _run(tb, model)
    assert result.final_output == "done"
    assert len(model.inputs) == 3
    first = _outputs(model.inputs[1])
    assert [item["call_id"] for item in first] == ["c0", "c1", "c2", "c3"]
    texts = [item["output"] for item in first]
    assert len(check_bounded(texts)) == 3
    assert texts[1].startswith("small")
    later = _outputs(model.inputs[2])
    assert [item["output"] for item in later[:4]] == texts  # the same bounded turn again
    assert later[4]["output"].startswith("small")
    assert len(load_session(record)) == 2


async def test_hook_context_follows_the_outputs_as_a_user_message(tmp_path: Path) -> None:
    """A PostToolBatch hook's context reaches the model after the batch's outputs."""
    from toolbatch.integrations.openai_agents import ToolbatchTools

    async def hook(batch: object) -> PostToolBatchOutput:
        del batch
        return PostToolBatchOutput(additional_context="remember the tests")

    model = scripted_model(shell_calls(SMALL_COMMAND, SMALL_COMMAND, SMALL_COMMAND), answer("ok"))
    async with ToolbatchTools(SchedulerConfig(artifacts_dir=tmp_path, hooks=[hook])) as tb:
        await _run(tb, model)
    tail = model.inputs[1][-4:]
    assert [item.get("type") for item in tail[:3]] == ["function_call_output"] * 3
    assert tail[3]["role"] == "user"
    assert "remember the tests" in tail[3]["content"]


async def test_cancelling_the_run_kills_the_running_commands(tmp_path: Path) -> None:
    """A cancelled Runner.run leaves no command running.

    The SDK cancels its tool tasks without waiting for them, so the commands are stopped
    just after ``Runner.run`` has returned, not before.
    """
    from toolbatch.integrations.openai_agents import ToolbatchTools

    pid_files = [tmp_path / f"pid{index}" for index in range(3)]
    model = scripted_model(shell_calls(*(pid_command(path) for path in pid_files)))
    async with ToolbatchTools(SchedulerConfig(artifacts_dir=tmp_path / "art")) as tb:
        run = asyncio.ensure_future(_run(tb, model))  # noqa: TID251  (what an SDK caller does)
        pids = [await wait_for_pid(path) for path in pid_files]
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert await wait_dead(pids) == []


def test_the_tools_need_an_open_session() -> None:
    """Reading .tools before opening says how to open it."""
    from toolbatch.integrations.openai_agents import ToolbatchTools

    with pytest.raises(RuntimeError, match="async with ToolbatchTools"):
        _ = ToolbatchTools().tools
