"""pydantic-ai: ``ToolbatchToolset``, toolbatch's tools for an ``Agent``, and its batch budget.

pydantic-ai runs each tool call of a model response itself (concurrently) and puts every
tool's full return into the next request. ``ToolbatchToolset`` is an ``AbstractToolset``
an ``Agent`` takes (``toolsets=[ts]``) offering toolbatch's tools: the registry's (the
shell by default), the configured MCP servers' and your own producers. The calls
pydantic-ai starts together run as one batch through ``ToolScheduler.execute``; when that
batch is all of this toolset's calls in the model response (pydantic-ai's default), the
toolset completes it at once as one toolbatch turn (``complete_turn``: the batch budget,
persist-once, PostToolBatch hooks, the send guard, the recorder) and each call returns its
bounded text, so the model sees the bounded parts and the full output is on disk once. A
hook's context or stop reason follows the returns as a ``UserPromptPart`` (the last call's
``ToolReturn.content``)::

    ts = ToolbatchToolset(SchedulerConfig(batch_budget=20_000))
    agent = Agent(model, toolsets=[ts])

Calls pydantic-ai runs one at a time (a ``sequential`` tool, the ``sequential`` execution
mode) are batches of one. ``ts.history_processor``, run before each model request,
completes the calls of the last model response that are still pending as one turn and puts
the bounded texts in their ``ToolReturnPart``s (a hook's text as a ``UserPromptPart`` after
the last); pydantic-ai 2.78 takes it as its ``ProcessHistory`` capability, which
``ts.capability`` is: ``Agent(model, toolsets=[ts], capabilities=[ts.capability])``.
Without it each batch is completed as it ran, under the budget on its own. Add it only
where calls run one at a time: pydantic-ai wraps every tool call in every capability's
hooks, which costs a 50-call turn about a fifth more.

The agent enters the toolset for each run (the scheduler opens on the first enter and
closes on the last); ``async with ts:`` around several runs keeps one session, its MCP
servers and artifacts open across them. Cancelling the run cancels the running calls, and
no command is left running. Only this toolset's calls are bounded: other tools' returns
are left as they are.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Collection
from types import TracebackType
from typing import Any, Self

from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from toolbatch import Registry, SchedulerConfig, ToolDeclaration, ToolScheduler, default_registry
from toolbatch.integrations._turns import Completion, SplitTurns, make_call

__all__ = ["ToolbatchToolset"]

_ANY_ARGS = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)
"""Arguments are checked by toolbatch against the tool's schema (an error response the
model sees), not by pydantic-ai (a retry prompt)."""


class ToolbatchToolset(AbstractToolset[Any]):
    """toolbatch's tools as a pydantic-ai toolset, with the batch budget as a history processor.

    Args:
        config: the scheduler's configuration (budget, MCP servers, sandbox, hooks,
            recorder...); ``None``: the defaults.
        registry: the toolbatch tools to offer; ``None``: ``toolbatch.default_registry()``.
        id: the toolset's id among the agent's toolsets.
    """

    def __init__(
        self,
        config: SchedulerConfig | None = None,
        *,
        registry: Registry | None = None,
        id: str | None = "toolbatch",
    ) -> None:
        self.scheduler = ToolScheduler(
            registry if registry is not None else default_registry(), config
        )
        self._id = id
        self._entered = 0
        self._turns = SplitTurns(self.scheduler)
        self._declared: list[ToolDeclaration] = []
        self._tools: dict[str, ToolsetTool[Any]] = {}
        self._response: ModelMessage | None = None
        self._response_calls: tuple[str, ...] | None = None
        """The last response :meth:`_turn_of` read, and its answer (its calls arrive together)."""

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def capability(self) -> ProcessHistory[Any]:
        """``ProcessHistory(self.history_processor)``, for ``Agent(capabilities=[...])``."""
        return ProcessHistory(self.history_processor)

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._entered == 0:
            await self.scheduler.__aenter__()
            self._entered += 1
            await self.scheduler.wait_for_tools()  # the MCP servers' tools are offered too
            return self
        self._entered += 1
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> bool | None:
        self._entered -= 1
        if self._entered == 0:
            await self.scheduler.__aexit__(exc_type, exc, tb)
        return None

    # -- tools ----------------------------------------------------------------------------

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        del ctx
        declarations = self.scheduler.declarations()
        if len(declarations) != len(self._declared) or not all(
            map(operator.is_, declarations, self._declared)
        ):  # a new session, or an MCP server's tools: built once per change, not per step
            self._declared = declarations
            self._tools = {
                declaration.name: ToolsetTool(
                    toolset=self,
                    tool_def=ToolDefinition(
                        name=declaration.name,
                        description=declaration.description,
                        parameters_json_schema=dict(declaration.input_schema),
                    ),
                    max_retries=0,
                    args_validator=_ANY_ARGS,
                )
                for declaration in declarations
            }
        return dict(self._tools)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        del tool
        call = make_call(ctx.tool_call_id, name, tool_args)
        answer = await self._turns.answer(call, turn=self._turn_of(ctx))
        if answer.context:
            return ToolReturn(answer.text, content=answer.context)
        return answer.text

    def _turn_of(self, ctx: RunContext[Any]) -> Collection[str] | None:
        """The ids of this toolset's calls in the model response being answered, which
        complete their turn as soon as they ran together; ``None`` when no history processor
        of this toolset runs in the agent: then each batch is completed as it ran."""
        response = ctx.messages[-1] if ctx.messages else None
        if response is self._response:
            return self._response_calls
        processed = any(
            isinstance(capability, ProcessHistory)
            and capability.processor == self.history_processor
            for capability in ctx.capabilities.values()
        )
        calls: tuple[str, ...] | None = None
        if processed:
            calls = ()  # not known: the history processor completes them
            if isinstance(response, ModelResponse):
                calls = tuple(
                    part.tool_call_id
                    for part in response.parts
                    if isinstance(part, ToolCallPart) and part.tool_name in self._tools
                )
        self._response, self._response_calls = response, calls
        return calls

    # -- the batch boundary ---------------------------------------------------------------

    async def history_processor(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """Complete the last model response's toolbatch calls as one turn, and bound them.

        The ``ToolReturnPart``s of those calls, in the requests after that response, get the
        text the model is sent; pydantic-ai keeps the processed history, so later requests
        carry the same text. Other parts and messages are kept as they are.
        """
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, ModelResponse):
                break
        else:
            return messages
        pending = [
            part.tool_call_id
            for part in message.parts
            if isinstance(part, ToolCallPart) and self._turns.is_pending(part.tool_call_id)
        ]
        if not pending:
            return messages
        completion = await self._turns.complete(pending)
        return [
            *messages[: index + 1],
            *(
                _bounded(later, completion) if isinstance(later, ModelRequest) else later
                for later in messages[index + 1 :]
            ),
        ]


def _bounded(request: ModelRequest, completion: Completion) -> ModelRequest:
    """``request`` with the completed calls' returns bounded, and the batch text after them."""
    parts: list[ModelRequestPart] = []
    for part in request.parts:
        if isinstance(part, ToolReturnPart) and part.tool_call_id in completion.texts:
            text = completion.texts[part.tool_call_id]
            # A typed subclass (tool search's) is never a toolbatch call's: the content is text.
            parts.append(dataclasses.replace(part, content=text))  # type: ignore[arg-type]
            if completion.context and part.tool_call_id == completion.last_call_id:
                parts.append(UserPromptPart(content=completion.context))
        else:
            parts.append(part)
    return dataclasses.replace(request, parts=parts)
