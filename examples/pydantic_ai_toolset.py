"""pydantic-ai with toolbatch's tools and batch budget, and no network.

Run it: ``python examples/pydantic_ai_toolset.py``

pydantic-ai's ``FunctionModel`` asks for three shell commands in one response; the agent
runs them through ``ToolbatchToolset`` as one batch, which bounds the three returns together
to 6,000 characters before the next request, printed as the model got it.
"""

from __future__ import annotations

import tempfile

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolbatch
from toolbatch.integrations.pydantic_ai import ToolbatchToolset

COMMANDS = ["seq 1 100000", "git --version || echo no git", "seq 5 200000"]


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Three commands first; then report what the tools returned."""
    del info
    last = messages[-1]
    if not any(isinstance(part, ToolReturnPart) for part in getattr(last, "parts", [])):
        return ModelResponse(
            parts=[
                ToolCallPart("run_shell_command", {"command": command}, tool_call_id=f"c{index}")
                for index, command in enumerate(COMMANDS)
            ]
        )
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, ToolReturnPart):
            text = str(part.content)
            print(f"== {part.tool_name} [{part.tool_call_id}]: {len(text):,} chars")
            print("   " + text.splitlines()[0])
    total = sum(len(str(p.content)) for p in last.parts if isinstance(p, ToolReturnPart))
    print(f"{total:,} characters of tool output sent, within budget 6,000")
    return ModelResponse(parts=[TextPart("Two long listings, saved; git answered.")])


async def main() -> None:
    toolbatch.configure_logging("warning")
    with tempfile.TemporaryDirectory() as artifacts:
        config = toolbatch.SchedulerConfig(batch_budget=6_000, artifacts_dir=artifacts)
        ts = ToolbatchToolset(config)
        agent = Agent(FunctionModel(model), toolsets=[ts])
        result = await agent.run("Look around.")
        print(f"model: {result.output}")


if __name__ == "__main__":
    anyio.run(main)
