"""ToolbatchNode in LangGraph's own graphs, driven by LangChain's fake chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from toolbatch import JsonlRecorder, SchedulerConfig, load_session

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import BaseTool

    from toolbatch.integrations.langgraph import ToolbatchNode

# LangGraph and LangChain (1 s of CPU) and toolbatch's module over them are imported where a
# test runs.
pytestmark = [INTEGRATIONS, requires("langgraph.prebuilt")]


@cache
def big_report_tool() -> BaseTool:
    """The LangChain tool ``big_report`` (made on first use: ``@tool`` imports LangChain)."""
    from langchain_core.tools import tool

    @tool
    def big_report(lines: int) -> str:
        """A LangChain tool with a long answer."""
        return "\n".join(f"report line {index}" for index in range(lines))

    return big_report


@cache
def _recording_chat_model_class() -> type[Any]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import BaseMessage  # noqa: F401  (pydantic reads the field's type here)

    class RecordingChatModel(GenericFakeChatModel):
        """LangChain's fake chat model, keeping every request it received."""

        requests: list[list[BaseMessage]] = []  # noqa: RUF012  (a pydantic field)

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordingChatModel:
            del tools, kwargs
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            self.requests.append(list(messages))
            return super()._generate(messages, *args, **kwargs)

    return RecordingChatModel


def recording_chat_model(*, messages: Any) -> Any:
    """A RecordingChatModel answering ``messages`` (its class, a subclass of LangChain's
    GenericFakeChatModel, is defined on the first call)."""
    return _recording_chat_model_class()(requests=[], messages=messages)


def _calls(*commands: str, report_lines: int | None = None) -> AIMessage:
    from langchain_core.messages import AIMessage

    calls = [
        {"name": "run_shell_command", "args": {"command": command}, "id": f"c{index}"}
        for index, command in enumerate(commands)
    ]
    if report_lines is not None:
        calls.append({"name": "big_report", "args": {"lines": report_lines}, "id": "report"})
    return AIMessage(content="", tool_calls=calls)


def _graph(model: Any, node: ToolbatchNode) -> Any:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    # These annotations name what is imported here, so langgraph cannot resolve them from
    # the module and takes the graph's state (MessagesState, the same) as the node's input.
    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def _tool_messages(request: list[BaseMessage]) -> list[ToolMessage]:
    from langchain_core.messages import ToolMessage

    return [message for message in request if isinstance(message, ToolMessage)]


async def test_a_turn_of_three_calls_reaches_the_model_bounded_in_order(tmp_path: Path) -> None:
    """The second request holds the three ToolMessages in call order, within the budget."""
    from langchain_core.messages import AIMessage

    from toolbatch.integrations.langgraph import ToolbatchNode

    model = recording_chat_model(
        messages=iter(
            [_calls(BIG_COMMAND, BIG_COMMAND, report_lines=4000), AIMessage(content="done")]
        ),
    )
    record = tmp_path / "turns.jsonl"
    config = SchedulerConfig(
        batch_budget=BUDGET, artifacts_dir=tmp_path / "art", recorder=JsonlRecorder(record)
    )
    async with ToolbatchNode(config, tools=[big_report_tool()]) as node:
        assert set(node.tools_by_name) == {"run_shell_command", "big_report"}
        state = await _graph(model, node).ainvoke({"messages": [("user", "go")]})
    assert state["messages"][-1].content == "done"
    assert len(model.requests) == 2
    sent = _tool_messages(model.requests[1])
    assert [message.tool_call_id for message in sent] == ["c0", "c1", "report"]
    texts = [str(message.content) for message in sent]
    artifacts = check_bounded(texts)
    assert len(artifacts) == 3
    assert all(message.status == "success" for message in sent)
    assert "60000" in artifacts[0].read_text().splitlines()
    [recorded] = load_session(record)
    assert [response.call_id for response in recorded.responses] == ["c0", "c1", "report"]


async def test_the_prebuilt_react_agent_v1_takes_the_node(tmp_path: Path) -> None:
    """create_react_agent(version="v1") runs the node's batch between two model turns."""
    from langchain_core.messages import AIMessage
    from langgraph.prebuilt import create_react_agent

    from toolbatch.integrations.langgraph import ToolbatchNode

    model = recording_chat_model(
        messages=iter([_calls(BIG_COMMAND, SMALL_COMMAND, BIG_COMMAND), AIMessage(content="ok")]),
    )
    config = SchedulerConfig(batch_budget=BUDGET, artifacts_dir=tmp_path)
    async with ToolbatchNode(config) as node:
        with pytest.warns(DeprecationWarning, match="create_react_agent"):
            agent = create_react_agent(model, node, version="v1")
        state = await agent.ainvoke({"messages": [("user", "go")]})
    assert state["messages"][-1].content == "ok"
    sent = _tool_messages(model.requests[1])
    assert [message.tool_call_id for message in sent] == ["c0", "c1", "c2"]
    check_bounded([str(message.content) for message in sent])
    assert str(sent[1].content).startswith("small")


async def test_an_unknown_tool_is_answered_in_its_place(tmp_path: Path) -> None:
    """A call the node does not know is an error ToolMessage with its id, not an exception."""
    from langchain_core.messages import AIMessage

    from toolbatch.integrations.langgraph import ToolbatchNode

    message = AIMessage(
        content="",
        tool_calls=[
            {"name": "nope", "args": {}, "id": "x"},
            {"name": "run_shell_command", "args": {"command": "echo hi"}, "id": "y"},
        ],
    )
    async with ToolbatchNode(SchedulerConfig(artifacts_dir=tmp_path)) as node:
        out = await node.ainvoke({"messages": [message]})
    first, second = out["messages"]
    assert (first.tool_call_id, first.status) == ("x", "error")
    assert "unknown tool 'nope'" in first.content
    assert (second.tool_call_id, second.status) == ("y", "success")


async def test_cancelling_the_graph_kills_the_running_commands(tmp_path: Path) -> None:
    """A cancelled graph run leaves no command running."""
    from toolbatch.integrations.langgraph import ToolbatchNode

    pid_files = [tmp_path / f"pid{index}" for index in range(3)]
    model = recording_chat_model(
        messages=iter([_calls(*(pid_command(path) for path in pid_files))])
    )
    async with ToolbatchNode(SchedulerConfig(artifacts_dir=tmp_path / "art")) as node:
        run = asyncio.ensure_future(  # noqa: TID251  (what a LangGraph caller does)
            _graph(model, node).ainvoke({"messages": [("user", "go")]})
        )
        pids = [await wait_for_pid(path) for path in pid_files]
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert not [pid for pid in pids if alive(pid)]


def test_the_node_refuses_a_sync_graph(tmp_path: Path) -> None:
    """Sync invoke is refused with the fix, not run on a scheduler of another loop."""
    from toolbatch.integrations.langgraph import ToolbatchNode

    node = ToolbatchNode(SchedulerConfig(artifacts_dir=tmp_path))
    with pytest.raises(RuntimeError, match="ainvoke"):
        node.invoke({"messages": [_calls(SMALL_COMMAND)]})
