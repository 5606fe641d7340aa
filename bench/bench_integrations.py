"""Issue 32: a 50-call turn through each framework integration against the framework's own
tool execution, side by side in one run (target: at most 1.2x).

Each row times one model turn of 50 calls of a trivial async tool (``add``), and the model's
next turn, which the calls' results go back to (the batch boundary where the integrations
complete the turn), with the framework's own test model:

* LangGraph: a one-node graph of ``ToolNode([add])`` against one of
  ``ToolbatchNode(tools=[add])``, on the same ``AIMessage`` (the same LangChain tool, run
  through toolbatch's scheduler).
* pydantic-ai: ``Agent.run`` with ``FunctionModel`` (50 calls, then an answer), the tool as
  the agent's own function tool against the same tool in a ``ToolbatchToolset`` (which
  completes the turn itself); a diagnostic row adds its history processor
  (``ts.capability``), which pydantic-ai wraps around every tool call. Another diagnostic
  row is the batch boundary alone, without toolbatch: a toolset whose calls wait for the
  response's last one and then return ``a + b``. Any toolset that answers a call only once
  its whole batch has run pays it: 50 of pydantic-ai's call stacks (about 20 coroutines
  each) stay suspended at once, so the garbage collector runs about five times a turn
  instead of once (the framework's own calls finish one by one, never suspending).
* The OpenAI Agents SDK: ``Runner.run`` with a scripted ``Model``, ``function_tool(add)``
  against ``ToolbatchTools`` with its ``model_input_filter``.
* mini-swe-agent (its only tool is the shell): ``DefaultAgent`` on a response of 50 ``true``
  actions with ``LocalEnvironment`` against ``ToolbatchAgent`` with ``ToolbatchEnvironment``
  (run as one concurrent batch), both unconfined: the row is the integration's cost, like
  for like. A diagnostic row runs the same turn in toolbatch's default sandbox (namespaces
  and Landlock per command; the shell area's rows measure that cost).

The two sides alternate within each round, so load drift on this shared machine falls on
both alike; the figure is the median wall time of the rounds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench._report import Row, Target
from toolbatch import Registry, SchedulerConfig, tool

CALLS = 50
TARGET_RATIO = 1.2
"""Issue 32: the integration's turn at most 1.2x the framework's own tool execution."""


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _row(framework: str, ours: list[float], theirs: list[float], baseline: str) -> Row:
    ours_ms = statistics.median(ours) * 1e3
    theirs_ms = statistics.median(theirs) * 1e3
    return Row(
        area="integrations",
        name=f"{framework}: a {CALLS}-call turn of a trivial tool (median of {len(ours)})",
        value=ours_ms,
        unit="ms",
        baseline=baseline,
        baseline_value=theirs_ms,
        ratio=ours_ms / theirs_ms,
        target=f"<= {TARGET_RATIO:g} (ratio = integration / framework's own, wall time)",
        goal=Target("ratio", "<=", TARGET_RATIO),
    )


async def _alternate(
    ours: Callable[[], Awaitable[None]], theirs: Callable[[], Awaitable[None]], rounds: int
) -> tuple[list[float], list[float]]:
    for _ in range(3):  # warm both paths up
        await ours()
        await theirs()
    timed_ours: list[float] = []
    timed_theirs: list[float] = []
    for index in range(rounds):
        for run_ours in (index % 2 == 0, index % 2 == 1):
            started = time.perf_counter()
            await (ours() if run_ours else theirs())
            (timed_ours if run_ours else timed_theirs).append(time.perf_counter() - started)
    return timed_ours, timed_theirs


# -- LangGraph ----------------------------------------------------------------------------


async def _langgraph(rounds: int, tmp: str) -> Row:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool as langchain_tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from toolbatch.integrations.langgraph import ToolbatchNode

    lc_add = langchain_tool(add)
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "add", "args": {"a": index, "b": 1}, "id": f"c{index}"}
            for index in range(CALLS)
        ],
    )
    state = {"messages": [message]}

    def graph_of(node: Any) -> Any:
        graph = StateGraph(MessagesState)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        return graph.compile()

    own = graph_of(ToolNode([lc_add]))
    async with ToolbatchNode(
        SchedulerConfig(artifacts_dir=tmp), registry=Registry(), tools=[lc_add]
    ) as node:
        graph = graph_of(node)

        async def ours() -> None:
            out = await graph.ainvoke(state)
            assert len(out["messages"]) == CALLS + 1

        async def theirs() -> None:
            out = await own.ainvoke(state)
            assert len(out["messages"]) == CALLS + 1

        timed = await _alternate(ours, theirs, rounds)
    return _row("LangGraph", *timed, "ToolNode([add]) in the same one-node graph")


# -- pydantic-ai --------------------------------------------------------------------------


async def _pydantic_ai(rounds: int, tmp: str) -> list[Row]:
    """The toolset as documented (it completes the turn itself); then, as a diagnostic, with
    ``ts.capability`` too (needed only for calls pydantic-ai runs one at a time), whose cost
    is pydantic-ai's: every capability wraps every tool call."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolbatch.integrations.pydantic_ai import ToolbatchToolset

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[
                ToolCallPart("add", {"a": index, "b": 1}, tool_call_id=f"c{index}")
                for index in range(CALLS)
            ]
        )

    own = Agent(FunctionModel(model), tools=[add])
    boundary = _batch_boundary_toolset()
    ts = ToolbatchToolset(
        SchedulerConfig(artifacts_dir=tmp), registry=Registry([tool(output_threshold=None)(add)])
    )
    rows: list[Row] = []
    async with ts:
        for capabilities in ([], [ts.capability], None):
            if capabilities is None:
                agent = Agent(FunctionModel(model), toolsets=[boundary])
            else:
                agent = Agent(FunctionModel(model), toolsets=[ts], capabilities=capabilities)

            async def ours(agent: Agent[None, str] = agent) -> None:
                assert (await agent.run("go")).output == "done"

            async def theirs() -> None:
                assert (await own.run("go")).output == "done"

            timed = await _alternate(ours, theirs, rounds)
            baseline = "Agent(tools=[add]).run, the same FunctionModel"
            if capabilities == []:
                rows.append(_row("pydantic-ai", *timed, baseline))
                continue
            if capabilities is None:
                name = "diagnostic: pydantic-ai, the batch boundary alone (no toolbatch)"
                target = (
                    "diagnostic (what any toolset answering at the batch boundary pays in "
                    "pydantic-ai: the floor of the row above)"
                )
            else:
                name = "diagnostic: pydantic-ai with ts.capability"
                target = (
                    "diagnostic (the history processor, for calls run one at a time: "
                    "pydantic-ai wraps each call in each capability's hooks)"
                )
            rows.append(dataclasses.replace(_row(name, *timed, baseline), target=target, goal=None))
    return rows


def _batch_boundary_toolset() -> Any:
    """A pydantic-ai toolset of ``add`` whose calls return once the response's last one has
    arrived (what a toolset completing the batch at its boundary does), without toolbatch."""
    import anyio
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
    from pydantic_core import SchemaValidator, core_schema

    validator = SchemaValidator(
        core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
    )

    class BatchBoundary(AbstractToolset[Any]):
        def __init__(self) -> None:
            self._arrived = 0
            self._all_arrived: anyio.Event | None = None

        @property
        def id(self) -> str | None:
            return "boundary"

        async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
            definition = ToolDefinition(
                name="add",
                description="Add two integers.",
                parameters_json_schema={"type": "object", "properties": {}},
            )
            return {
                "add": ToolsetTool(
                    toolset=self, tool_def=definition, max_retries=0, args_validator=validator
                )
            }

        async def call_tool(
            self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: Any
        ) -> Any:
            if self._all_arrived is None:
                self._all_arrived = anyio.Event()
            all_arrived = self._all_arrived
            self._arrived += 1
            if self._arrived == CALLS:
                self._arrived, self._all_arrived = 0, None
                all_arrived.set()
            else:
                await all_arrived.wait()
            return str(tool_args["a"] + tool_args["b"])

    return BatchBoundary()


# -- the OpenAI Agents SDK ----------------------------------------------------------------


async def _openai_agents(rounds: int, tmp: str) -> Row:
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from toolbatch.integrations.openai_agents import ToolbatchTools

    class TwoTurns(Model):
        async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
            del system_instructions, args, kwargs
            if any(item.get("type") == "function_call_output" for item in input):
                output: list[Any] = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[
                            ResponseOutputText(type="output_text", text="done", annotations=[])
                        ],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"c{index}",
                        name="add",
                        arguments=json.dumps({"a": index, "b": 1}),
                    )
                    for index in range(CALLS)
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    own = Agent(name="own", model=TwoTurns(), tools=[function_tool(add)])
    own_config = RunConfig(tracing_disabled=True)
    registry = Registry([tool(output_threshold=None)(add)])
    async with ToolbatchTools(SchedulerConfig(artifacts_dir=tmp), registry=registry) as tb:
        agent = Agent(name="ours", model=TwoTurns(), tools=tb.tools)
        config = RunConfig(call_model_input_filter=tb.model_input_filter, tracing_disabled=True)

        async def ours() -> None:
            assert (await Runner.run(agent, "go", run_config=config)).final_output == "done"

        async def theirs() -> None:
            assert (await Runner.run(own, "go", run_config=own_config)).final_output == "done"

        timed = await _alternate(ours, theirs, rounds)
    return _row("OpenAI Agents SDK", *timed, "Runner.run with function_tool(add)")


# -- mini-swe-agent -----------------------------------------------------------------------


async def _mini_swe_agent(rounds: int, tmp: str) -> list[Row]:
    """Like for like, both unconfined (the integration's own cost: one batch, the budget,
    the artifacts); then, as a diagnostic, with toolbatch's default sandbox, whose cost per
    command is the shell area's row."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models.test_models import DeterministicModel, make_output

    from toolbatch.integrations.mini_swe_agent import ToolbatchAgent, ToolbatchEnvironment

    actions = [{"command": "true"} for _ in range(CALLS)]
    submit = [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]
    templates = {"system_template": "system", "instance_template": "{{task}}", "cost_limit": 0}

    def run_once(agent_class: type[DefaultAgent], env: Any) -> None:
        model = DeterministicModel(outputs=[make_output("", actions), make_output("", submit)])
        result = agent_class(model, env, **templates).run("go")
        assert result["exit_status"] == "Submitted", result

    local = LocalEnvironment()
    rows: list[Row] = []
    for sandbox in ("off", "workspace-write"):
        with ToolbatchEnvironment(artifacts_dir=tmp, sandbox=sandbox) as env:

            async def ours(env: Any = env) -> None:
                await asyncio.to_thread(run_once, ToolbatchAgent, env)

            async def theirs() -> None:
                await asyncio.to_thread(run_once, DefaultAgent, local)

            timed = await _alternate(ours, theirs, rounds)
        row = _row(
            "mini-swe-agent" if sandbox == "off" else "diagnostic: mini-swe-agent, sandboxed",
            *timed,
            "DefaultAgent with LocalEnvironment (subprocess.run per action, unconfined)",
        )
        if sandbox != "off":
            row = dataclasses.replace(
                row,
                target="diagnostic (the same turn in toolbatch's default sandbox: 50 x the "
                "shell area's sandbox cost)",
                goal=None,
            )
        rows.append(row)
    return rows


def run(quick: bool) -> list[Row]:
    rounds = 5 if quick else 15
    rows: list[Row] = []
    for bench in (_langgraph, _pydantic_ai, _openai_agents):
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(bench(rounds, tmp))
        rows.extend(result if isinstance(result, list) else [result])
    with tempfile.TemporaryDirectory() as tmp:
        rows.extend(asyncio.run(_mini_swe_agent(rounds, tmp)))
    return rows
