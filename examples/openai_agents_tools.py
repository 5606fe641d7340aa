"""The OpenAI Agents SDK with toolbatch's tools and batch budget, and no network.

Run it: ``python examples/openai_agents_tools.py``

A scripted ``Model`` asks for three shell commands in one response; ``Runner.run`` runs them
as ``ToolbatchTools``' function tools, and its ``model_input_filter`` bounds their outputs
together to 6,000 characters before the next model call, which is printed as sent.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio
from agents import Agent, ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import toolbatch
from toolbatch.integrations.openai_agents import ToolbatchTools

COMMANDS = ["seq 1 100000", "uname -s", "seq 5 200000"]


class ScriptedModel(Model):
    """Three commands first; then report what the tools returned."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = [item for item in input if item.get("type") == "function_call_output"]
        if not outputs:
            calls: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"c{index}",
                    name="run_shell_command",
                    arguments=json.dumps({"command": command}),
                )
                for index, command in enumerate(COMMANDS)
            ]
            return ModelResponse(output=calls, usage=Usage(), response_id=None)
        for item in outputs:
            print(f"== run_shell_command [{item['call_id']}]: {len(item['output']):,} chars")
            print("   " + item["output"].splitlines()[0])
        total = sum(len(item["output"]) for item in outputs)
        print(f"{total:,} characters of tool output sent, within budget 6,000")
        text = ResponseOutputText(type="output_text", text="Listings saved; Linux.", annotations=[])
        message = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("this example runs Runner.run")


async def main() -> None:
    toolbatch.configure_logging("warning")
    with tempfile.TemporaryDirectory() as artifacts:
        config = toolbatch.SchedulerConfig(batch_budget=6_000, artifacts_dir=artifacts)
        async with ToolbatchTools(config) as tb:
            agent = Agent(name="coder", model=ScriptedModel(), tools=tb.tools)
            run_config = RunConfig(
                call_model_input_filter=tb.model_input_filter, tracing_disabled=True
            )
            result = await Runner.run(agent, "Look around.", run_config=run_config)
        print(f"model: {result.final_output}")


if __name__ == "__main__":
    anyio.run(main)
