"""A subagent: the parent model delegates a task to a child agent with its own tools.

Run it: ``python examples/subagent.py``

The child gets the shell and a small budget; each of its tool turns is finalized before
it enters the child's history, and only its final answer reaches the parent, as the output
of the parent's ``agent`` tool (bounded again by the parent's finalizer).
"""

from __future__ import annotations

import anyio

import toolbatch
from toolbatch.agent import AgentLoop, ScriptedModel, SubagentTool


def child_model() -> ScriptedModel:
    return ScriptedModel(
        [
            [
                {"name": "run_shell_command", "args": {"command": "seq 1 100000 | wc -l"}},
                {"name": "run_shell_command", "args": {"command": "seq 1 100000"}},
            ],
            "The sequence has 100000 lines; its tail ends at 100000.",
        ]
    )


async def main() -> None:
    child_registry = toolbatch.default_registry()
    agent = SubagentTool(
        model_factory=child_model,
        registry=child_registry,
        config=toolbatch.SchedulerConfig(batch_budget=4_000),
    )
    parent = ScriptedModel(
        [[{"name": "agent", "args": {"prompt": "How many lines does seq 1 100000 print?"}}]]
    )
    async with toolbatch.ToolScheduler(toolbatch.Registry([agent])) as scheduler:
        outcome = await AgentLoop(parent, scheduler).prompt("Delegate the counting.")
    [turn] = outcome.turns
    [response] = turn.responses
    print(f"parent received from the subagent ({response.content_length} chars):")
    print(response.display)


if __name__ == "__main__":
    toolbatch.configure_logging("warning")
    anyio.run(main)
