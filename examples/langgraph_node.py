"""LangGraph with toolbatch as its tool node, and no network.

Run it: ``python examples/langgraph_node.py``

LangChain's fake chat model asks for three calls in one turn (two long shell commands and a
LangChain ``@tool``); ``ToolbatchNode`` runs them as one toolbatch batch, bounded to 6,000
characters together, and the model's next request gets the bounded ``ToolMessage``s, in
call order, each cut one naming the file that holds all of it.
"""

from __future__ import annotations

import tempfile

import anyio
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

import toolbatch
from toolbatch.integrations.langgraph import ToolbatchNode


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


async def main() -> None:
    toolbatch.configure_logging("warning")
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[
                        {
                            "name": "run_shell_command",
                            "args": {"command": "seq 1 100000"},
                            "id": "a",
                        },
                        {
                            "name": "run_shell_command",
                            "args": {"command": "seq 5 200000"},
                            "id": "b",
                        },
                        {"name": "word_count", "args": {"text": "one two three"}, "id": "c"},
                    ],
                ),
                AIMessage(content="The logs are long; the counts are in the files."),
            ]
        )
    )

    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    with tempfile.TemporaryDirectory() as artifacts:
        config = toolbatch.SchedulerConfig(batch_budget=6_000, artifacts_dir=artifacts)
        async with ToolbatchNode(config, tools=[word_count]) as node:
            graph = StateGraph(MessagesState)
            graph.add_node("agent", agent)
            graph.add_node("tools", node)
            graph.add_edge(START, "agent")
            graph.add_conditional_edges("agent", tools_condition, ["tools", END])
            graph.add_edge("tools", "agent")
            state = await graph.compile().ainvoke({"messages": [("user", "count")]})
        sent = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        for message in sent:
            text = str(message.content)
            print(
                f"== {message.name} [{message.tool_call_id}] {message.status}: {len(text):,} chars"
            )
            print("   " + text.splitlines()[0])
        total = sum(len(str(message.content)) for message in sent)
        print(f"{total:,} characters of tool output sent, within budget 6,000")
        print(f"model: {state['messages'][-1].content}")


if __name__ == "__main__":
    anyio.run(main)
