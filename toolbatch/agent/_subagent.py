"""Subagents: a tool that hands a task to a child agent loop with its own tools.

The child runs a headless runtime, so every one of its tool turns is finalized before it
enters the child's history; only the child's final answer goes back to the parent model,
as this tool's output (bounded again by the parent's own finalizer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from toolbatch._core import ToolCall, ToolDeclaration, ToolResult
from toolbatch.agent._loop import AgentLoop, HeadlessRuntime
from toolbatch.agent._messages import Model
from toolbatch.producers import ProducerContext
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

__all__ = ["DEFAULT_SUBAGENT_MAX_TURNS", "SubagentTool"]

DEFAULT_SUBAGENT_MAX_TURNS: Final = 10


class SubagentTool:
    """A Producer that delegates a task (``{"prompt": ...}``) to a child agent.

    Args:
        model_factory: makes the child's model, once per call.
        registry: the child's tools.
        config: the child's scheduler configuration (its store defaults to the parent's).
        name: the tool name.
        description: what the parent model is told.
        max_turns: the child's model turns per task.
    """

    def __init__(
        self,
        *,
        model_factory: Callable[[], Model],
        registry: Registry,
        config: SchedulerConfig | None = None,
        name: str = "agent",
        description: str = "Delegate a self-contained task to a subagent; returns its answer.",
        max_turns: int = DEFAULT_SUBAGENT_MAX_TURNS,
    ) -> None:
        self.model_factory = model_factory
        self.registry = registry
        self.config = config if config is not None else SchedulerConfig()
        self.max_turns = max_turns
        self._declaration = ToolDeclaration(
            name=name,
            description=description,
            input_schema={
                "type": "object",
                "properties": {
                    "prompt": {"type": "string", "description": "the task, self-contained"},
                },
                "required": ["prompt"],
                "additionalProperties": False,
            },
        )

    @property
    def declaration(self) -> ToolDeclaration:
        """The subagent tool's declaration."""
        return self._declaration

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Run the child agent on the task and return its final answer."""
        prompt = call.args.get("prompt")
        extra = set(call.args) - {"prompt"}
        if not isinstance(prompt, str) or not prompt.strip() or extra:
            return ToolResult.failure(
                f"{self._declaration.name!r} needs {{'prompt': <non-empty string>}} and nothing "
                f"else, got {call.args!r}",
                type="invalid_args",
            )
        child_config = dataclasses.replace(
            self.config,
            store=self.config.store or context.store,
            recorder=None,
        )
        async with ToolScheduler(self.registry, child_config) as child:
            loop = AgentLoop(
                self.model_factory(), child, runtime=HeadlessRuntime(), max_turns=self.max_turns
            )
            outcome = await loop.prompt(prompt)
        footer = (
            f"\n\n[subagent finished: {len(outcome.turns)} tool turn(s), "
            f"stop reason {outcome.stop_reason}]"
        )
        return ToolResult(
            content=(outcome.text or "(no answer)") + footer,
            display={
                "answer": outcome.text,
                "stop_reason": outcome.stop_reason,
                "tool_turns": len(outcome.turns),
                "tool_calls": sum(len(t.responses) for t in outcome.turns),
            },
        )
