"""The OpenAI Agents SDK: ``ToolbatchTools``, toolbatch's tools and its batch budget for a run.

The Agents SDK runs each function tool of a model response itself (concurrently) and puts
every tool's full output into the next model input. ``ToolbatchTools`` is opened with
``async with`` (it owns a ``ToolScheduler``); its ``.tools`` are the SDK's
``FunctionTool``s for toolbatch's tools (the registry's, the shell by default, and the
configured MCP servers'), each call answered through ``ToolScheduler.execute`` (the
producers bound their own output). Its ``.model_input_filter``, given to
``RunConfig(call_model_input_filter=...)``, runs before each model call: it completes the
calls of the last model response as one toolbatch turn (``complete_turn``: the batch
budget, persist-once, PostToolBatch hooks, the send guard, the recorder) and sends the
bounded texts in their ``function_call_output`` items; a hook's context or stop reason
follows them as a user message::

    async with ToolbatchTools(SchedulerConfig(batch_budget=20_000)) as tb:
        agent = Agent(name="coder", tools=tb.tools)
        config = RunConfig(call_model_input_filter=tb.model_input_filter)
        result = await Runner.run(agent, "fix the build", run_config=config)

The SDK keeps the unbounded outputs in its own items and rebuilds the input from them for
every call; the filter keeps each completed turn's texts (by call id and occurrence, so a
reused call id is no confusion) and sends the same bounded text every time, completing
each turn once. Cancelling the run cancels the running calls, and no command is left
running. Only this object's calls are bounded: other tools' outputs are left as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, cast

from agents import FunctionTool
from agents.items import TResponseInputItem
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from toolbatch import Registry, SchedulerConfig, ToolScheduler, default_registry
from toolbatch.integrations._turns import SplitTurns, make_call

__all__ = ["ToolbatchTools"]

_Occurrence = tuple[str, int]
"""A ``function_call_output`` item: its call id and how many outputs with that id precede it."""


def _field(item: object, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else None


class ToolbatchTools:
    """toolbatch's tools as Agents SDK function tools, with the batch budget as an input filter.

    Args:
        config: the scheduler's configuration (budget, MCP servers, sandbox, hooks,
            recorder...); ``None``: the defaults.
        registry: the toolbatch tools to offer; ``None``: ``toolbatch.default_registry()``.
    """

    def __init__(
        self, config: SchedulerConfig | None = None, *, registry: Registry | None = None
    ) -> None:
        self.scheduler = ToolScheduler(
            registry if registry is not None else default_registry(), config
        )
        self._turns = SplitTurns(self.scheduler)
        self._sent: dict[_Occurrence, str] = {}
        self._context: dict[_Occurrence, str] = {}
        self._open = False

    async def __aenter__(self) -> Self:
        await self.scheduler.__aenter__()
        self._open = True
        await self.scheduler.wait_for_tools()  # .tools lists the MCP servers' tools too
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._open = False
        await self.scheduler.__aexit__(exc_type, exc, tb)

    @property
    def tools(self) -> list[FunctionTool]:
        """A ``FunctionTool`` per tool the scheduler offers now (MCP tools included).

        Raises:
            RuntimeError: not opened yet (``async with ToolbatchTools(...) as tb``).
        """
        if not self._open:
            raise RuntimeError("open it first: async with ToolbatchTools(...) as tb: tb.tools")
        return [
            FunctionTool(
                name=declaration.name,
                description=declaration.description,
                params_json_schema=dict(declaration.input_schema),
                on_invoke_tool=self._invoker(declaration.name),
                strict_json_schema=False,
            )
            for declaration in self.scheduler.declarations()
        ]

    def _invoker(self, name: str) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            return await self._turns.run(make_call(context.tool_call_id, name, arguments))

        return invoke

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Complete the last model response's toolbatch calls as one turn; send them bounded.

        For ``RunConfig(call_model_input_filter=...)``. Items other than the completed
        calls' outputs are passed as they are.
        """
        items = data.model_data.input
        pending = [
            call_id
            for item in items
            if _field(item, "type") == "function_call"
            and self._turns.is_pending(call_id := _field(item, "call_id"))
        ]
        if pending:
            await self._complete(items, pending)
        if not self._sent:
            return data.model_data
        return ModelInputData(input=self._bounded(items), instructions=data.model_data.instructions)

    async def _complete(self, items: list[TResponseInputItem], pending: list[str]) -> None:
        completion = await self._turns.complete(pending)
        seen = Counter(
            _field(item, "call_id")
            for item in items
            if _field(item, "type") == "function_call_output"
        )
        # The outputs of the calls just completed are the last ones with their ids.
        for call_id, text in completion.texts.items():
            self._sent[(call_id, seen[call_id] - 1)] = text
        if completion.context and completion.last_call_id is not None:
            last = completion.last_call_id
            self._context[(last, seen[last] - 1)] = completion.context

    def _bounded(self, items: list[TResponseInputItem]) -> list[TResponseInputItem]:
        seen: Counter[str] = Counter()
        bounded: list[TResponseInputItem] = []
        for item in items:
            if _field(item, "type") != "function_call_output":
                bounded.append(item)
                continue
            call_id = _field(item, "call_id")
            key = (call_id, seen[call_id])
            seen[call_id] += 1
            text = self._sent.get(key)
            if text is not None:
                item = cast(TResponseInputItem, {**item, "output": text})
            bounded.append(item)
            context = self._context.get(key)
            if context is not None:
                bounded.append({"role": "user", "content": context})
        return bounded
