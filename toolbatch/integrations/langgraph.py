"""LangGraph: ``ToolbatchNode``, a ``ToolNode`` that runs an ``AIMessage``'s calls as one batch.

LangGraph's ``ToolNode`` runs the last ``AIMessage``'s ``tool_calls`` concurrently and
returns every ``ToolMessage`` whole. ``ToolbatchNode`` stands where it stands
(``graph.add_node("tools", node)``, or ``create_react_agent(model, node, version="v1")``)
and runs those calls as one toolbatch turn: ``ToolScheduler.run_batch``, so the turn's tool
text is bounded by the batch budget, complete output is persisted once, hooks and
permissions apply and the configured recorder records it. It returns one ``ToolMessage``
per call, in call order, with the call's ``tool_call_id``; a hook's context or stop reason
follows them as one ``HumanMessage``.

The tools are the registry's (the shell by default), the configured MCP servers' and the
LangChain tools given in ``tools=`` (``BaseTool`` or ``@tool`` functions), which become
toolbatch tools beside them. ``node.tools_by_name`` holds a LangChain tool for each, so
``model.bind_tools(node.tools_by_name.values())`` (and ``create_react_agent``) declares them
all; MCP tools appear once the node is open.

Open it with ``async with`` (it owns a ``ToolScheduler``) and run the graph with
``ainvoke`` / ``astream``: the node is async only. The prebuilt agent's ``version="v2"``
sends each call to its own node run, so each call is then a batch of one; use
``version="v1"`` for one batch per model turn. Cancelling the graph's task cancels the
batch, and no command is left running.

``ToolNode`` offers no batch-level extension point (``awrap_tool_call`` wraps one call), so
``ToolbatchNode`` overrides its two node functions, ``_func`` and ``_afunc``, which the
installed langgraph-prebuilt 1.1 calls with the keyword arguments their signatures name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Final, Self

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel

from toolbatch import (
    ProducerContext,
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolDeclaration,
    ToolResult,
    ToolScheduler,
    default_registry,
)
from toolbatch.integrations._turns import in_own_task, make_call, turn_texts

__all__ = [
    "ToolbatchNode",
]

LANGCHAIN_OUTPUT_THRESHOLD_CHARS: Final = 25_000
"""A LangChain tool's output over this many characters is persisted and previewed (the
default of a toolbatch Python tool); the batch budget bounds the turn in any case."""


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, ToolMessage):
        return value.text if isinstance(value.content, list) else str(value.content)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        return str(value)


class _LangChainProducer:
    """A LangChain tool as a toolbatch producer: validated and run by the tool itself."""

    output_threshold: int | None = LANGCHAIN_OUTPUT_THRESHOLD_CHARS

    def __init__(self, tool: BaseTool) -> None:
        self.tool = tool
        schema = convert_to_openai_tool(tool)["function"]
        self.declaration = ToolDeclaration(
            name=tool.name,
            description=schema.get("description", ""),
            input_schema=schema.get("parameters") or {"type": "object", "properties": {}},
        )

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        del context
        try:
            value = await self.tool.ainvoke(dict(call.args))
        except Exception as exc:  # the tool's own failure is the model's information
            return ToolResult.failure(f"{type(exc).__name__}: {exc}")
        return ToolResult(content=_as_text(value))


def _as_langchain_tool(tool: BaseTool | Callable[..., Any]) -> BaseTool:
    if isinstance(tool, BaseTool):
        return tool
    from langchain_core.tools import tool as make_tool

    made = make_tool(tool)
    assert isinstance(made, BaseTool)
    return made


class ToolbatchNode(ToolNode):
    """A LangGraph node that runs the last ``AIMessage``'s tool calls as one toolbatch batch.

    Args:
        config: the scheduler's configuration (budget, MCP servers, sandbox, hooks,
            recorder...); ``None``: the defaults.
        registry: toolbatch tools to offer; ``None``: ``toolbatch.default_registry()``
            (the shell). It is copied, never changed.
        tools: LangChain tools (``BaseTool`` or ``@tool`` functions) to offer as toolbatch
            tools beside the registry's.
        name: the node's name.
        messages_key: the state key holding the messages.

    Raises:
        ToolRegistrationError: a tool name is taken or not a valid tool name.
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        registry: Registry | None = None,
        tools: Iterable[BaseTool | Callable[..., Any]] = (),
        name: str = "tools",
        messages_key: str = "messages",
    ) -> None:
        own = registry.copy() if registry is not None else default_registry()
        langchain_tools = [_as_langchain_tool(tool) for tool in tools]
        for tool in langchain_tools:
            own.register(_LangChainProducer(tool))
        self.scheduler = ToolScheduler(own, config)
        self._langchain = {tool.name: tool for tool in langchain_tools}
        super().__init__(
            [self._stand_in(declaration) for declaration in own.declarations()],
            name=name,
            messages_key=messages_key,
        )
        self._toolbatch_messages_key = messages_key

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.scheduler.__aenter__()
        for declaration in await self.scheduler.wait_for_tools():  # the MCP servers' too
            if declaration.name not in self.tools_by_name:
                self.tools_by_name[declaration.name] = self._stand_in(declaration)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.scheduler.__aexit__(exc_type, exc, tb)

    def _stand_in(self, declaration: ToolDeclaration) -> BaseTool:
        """The LangChain tool that declares ``declaration`` to the model (and runs it alone)."""
        own = self._langchain.get(declaration.name)
        if own is not None:
            return own
        name = declaration.name

        async def run_alone(**args: Any) -> str:
            call = ToolCall.model_validate({"id": "direct", "name": name, "args": args})
            turn = await self.scheduler.run_batch([call])
            return turn_texts(turn)[0].get("direct", "")

        return StructuredTool(
            name=name,
            description=declaration.description or name,
            args_schema=dict(declaration.input_schema),
            coroutine=run_alone,
        )

    # -- the node -------------------------------------------------------------------------

    # Without ``runtime``: langgraph injects it only inside a graph, and the node needs none,
    # so the node also runs on its own (``await node.ainvoke(state)``).
    def _func(  # type: ignore[override]
        self,
        input: list[AnyMessage] | dict[str, Any] | BaseModel,
        config: RunnableConfig,
    ) -> Any:
        del input, config
        raise RuntimeError(
            "ToolbatchNode runs in async graphs only: call ainvoke/astream, inside "
            "'async with ToolbatchNode(...)'"
        )

    async def _afunc(  # type: ignore[override]
        self,
        input: list[AnyMessage] | dict[str, Any] | BaseModel,
        config: RunnableConfig,
    ) -> Any:
        del config
        raw_calls, shape = self._calls_of(input)
        calls = [
            make_call(raw.get("id"), raw.get("name") or "", raw.get("args"), ordinal)
            for ordinal, raw in enumerate(raw_calls)
        ]
        messages = await self.run_calls(calls)
        return messages if shape == "list" else {self._toolbatch_messages_key: messages}

    async def run_calls(self, calls: Sequence[ToolCall]) -> list[AnyMessage]:
        """Run ``calls`` as one turn: a ``ToolMessage`` per call in order, then batch text.

        Raises:
            RuntimeError: the node is not open.
            RecorderError: the configured recorder failed.
        """
        turn = await in_own_task(lambda: self.scheduler.run_batch(calls))
        texts, context = turn_texts(turn)
        messages: list[AnyMessage] = [
            ToolMessage(
                content=texts.get(response.call_id, ""),
                tool_call_id=response.call_id,
                name=response.name,
                status="success" if response.status == "success" else "error",
            )
            for response in turn.responses
        ]
        if context:
            messages.append(HumanMessage(content=context))
        return messages

    def _calls_of(
        self, input: list[AnyMessage] | dict[str, Any] | BaseModel
    ) -> tuple[list[dict[str, Any]], str]:
        """The calls to run and the input's shape (``list`` or ``dict``), as ToolNode reads them."""
        key = self._toolbatch_messages_key
        if isinstance(input, dict) and input.get("__type") == "tool_call_with_context":
            return [dict(input["tool_call"])], "dict"  # a prebuilt v2 Send: one call
        if isinstance(input, list):
            if input and isinstance(input[-1], dict) and input[-1].get("type") == "tool_call":
                return [dict(call) for call in input], "dict"
            messages: Sequence[Any] = input
            shape = "list"
        elif isinstance(input, dict):
            messages, shape = input.get(key) or [], "dict"
        else:
            messages, shape = getattr(input, key, None) or [], "dict"
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return [dict(call) for call in message.tool_calls], shape
        raise ValueError(f"no AIMessage in the node's input under {key!r}")
