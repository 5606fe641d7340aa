"""The scheduler: one model turn's batch of tool calls, run concurrently, answered in order.

The sequence, always: validate and plan the calls (unknown tools, invalid calls and repeated
ids get their error responses in place), run the rest concurrently under the concurrency
limit, each with a timeout, gather the responses in ordinal order, finalize, run the
PostToolBatch hooks, finalize again, pass the parts through the send guard, record the turn
(when a recorder is configured) and return it. Bad input never escapes ``run_batch``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Self

import anyio
import structlog
from pydantic import ValidationError

from toolbatch._artifact_home import artifact_session
from toolbatch._wire import (
    BatchObserver,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolResult,
    Turn,
)
from toolbatch.artifacts import ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize import DEFAULT_BATCH_BUDGET_CHARS, DEFAULT_LIFECYCLE_REMINDERS
from toolbatch.hooks import (
    DEFAULT_HOOK_TIMEOUT_S,
    CommandHook,
    PostToolBatchHook,
    apply_hook_output,
    build_hook_input,
    run_post_tool_batch_hooks,
)
from toolbatch.producers import Producer, ProducerContext, apply_output_threshold
from toolbatch.recorder import Recorder, response_kind
from toolbatch.scheduler._assembler import TurnAssembler
from toolbatch.scheduler._registry import Registry

__all__ = [
    "DEFAULT_CALL_TIMEOUT_CEILING_S",
    "DEFAULT_CONCURRENCY",
    "ApprovalCallback",
    "BatchObserver",
    "SchedulerConfig",
    "ToolScheduler",
]

log = structlog.get_logger("toolbatch.scheduler")

DEFAULT_CONCURRENCY: Final = 10
DEFAULT_CALL_TIMEOUT_CEILING_S: Final = 600.0
"""The longest any one call may run unless configured otherwise (shell's own maximum)."""
BACKSTOP_GRACE_S: Final = 10.0
"""Time a producer gets past the ceiling to clean up and answer before it is cut off."""
DEADLINE_POLL_S: Final = 0.1
"""How often a batch's deadline watcher looks again (its timing precision)."""

ApprovalCallback = Callable[[ToolCall, ToolDeclaration], Awaitable[bool]]
"""Asked before a tool whose declaration needs permission runs; ``False`` rejects it."""


def _check_positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """How a ``ToolScheduler`` runs batches.

    Attributes:
        batch_budget: the aggregate budget of model-facing text per batch, in code points
            (``None`` disables it).
        concurrency: how many calls run at once.
        call_timeout: the ceiling on any one call, in seconds. Producers have shorter
            defaults of their own (shell 120 s unless the call asks for more, MCP 60 s,
            Python tools 120 s) and honour this ceiling.
        artifacts_dir: where complete output is kept (default: this session's folder of
            the per-user state directory, ``sessions/<session_id>``, kept while the session
            is open and for 7 days after its last use; see ``toolbatch artifacts``).
        store: an ``ArtifactStore`` to use instead of making one at ``artifacts_dir``.
        mcp_servers: an ``{"mcpServers": {...}}`` document, as a dict or a JSON file path;
            its servers are started and discovered on enter and stopped on exit.
        hooks: PostToolBatch hooks: async callables and ``CommandHook``s.
        hook_timeout: seconds a Python hook may take (command hooks have their own).
        recorder: where each finalized turn is recorded before it is returned.
        lifecycle_reminders: protected lifecycle reminder texts per tool name.
        session_id: passed to hooks and recorded.
    """

    batch_budget: int | None = DEFAULT_BATCH_BUDGET_CHARS
    concurrency: int = DEFAULT_CONCURRENCY
    call_timeout: float = DEFAULT_CALL_TIMEOUT_CEILING_S
    artifacts_dir: str | os.PathLike[str] | None = None
    store: ArtifactStore | None = None
    mcp_servers: Mapping[str, Any] | str | os.PathLike[str] | None = None
    hooks: Sequence[PostToolBatchHook | CommandHook] = ()
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT_S
    recorder: Recorder | None = None
    lifecycle_reminders: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: dict(DEFAULT_LIFECYCLE_REMINDERS)
    )
    session_id: str | None = None

    def __post_init__(self) -> None:
        budget = self.batch_budget
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigError(
                f"batch_budget must be a positive int of characters or None to disable, "
                f"got {budget!r}"
            )
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or self.concurrency < 1
        ):
            raise ConfigError(f"concurrency must be an int >= 1, got {self.concurrency!r}")
        _check_positive("call_timeout", self.call_timeout)
        _check_positive("hook_timeout", self.hook_timeout)
        if isinstance(self.hooks, str | bytes) or not isinstance(self.hooks, Sequence):
            raise ConfigError(f"hooks must be a list of hooks, got {self.hooks!r}")
        for index, hook in enumerate(self.hooks):
            if not callable(hook):
                raise ConfigError(
                    f"hooks[{index}] = {hook!r} is not callable; pass an async function or a "
                    f"toolbatch.hooks.CommandHook"
                )
        if self.recorder is not None and not callable(getattr(self.recorder, "record_turn", None)):
            raise ConfigError(
                f"recorder {self.recorder!r} has no record_turn method; use "
                f"toolbatch.JsonlRecorder(path)"
            )


@dataclass(slots=True, eq=False)
class _Plan:
    """One call's place in the batch and, once known, its response."""

    ordinal: int
    call: ToolCall
    producer: Producer | None = None
    response: ToolCallResponse | None = None
    scope: anyio.CancelScope | None = None
    context: ProducerContext | None = None
    deadline: float | None = None
    timeout_s: float = 0.0
    timed_out: bool = False


class _CallLog:
    """The scheduler's logger bound to one call, bound only when first used (hot path)."""

    __slots__ = ("_bound", "_call_id", "_tool")

    def __init__(self, call_id: str, tool: str) -> None:
        self._call_id = call_id
        self._tool = tool
        self._bound: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._bound is None:
            self._bound = log.bind(call_id=self._call_id, tool=self._tool)
        return getattr(self._bound, name)


def _safe_notify(method: Callable[..., None] | None, *args: object) -> None:
    if method is None:
        return
    try:
        method(*args)
    except Exception as exc:  # an observer never breaks the batch
        log.warning("scheduler.observer_failed", error=f"{type(exc).__name__}: {exc}")


class ToolScheduler:
    """Runs batches of tool calls. Use it as an async context manager.

    ``async with ToolScheduler(registry, config) as scheduler:`` starts the MCP servers of
    the configuration and makes the artifact store; ``await scheduler.run_batch(calls)``
    returns a ``Turn`` per batch; leaving the block stops the servers.
    """

    def __init__(self, registry: Registry, config: SchedulerConfig | None = None) -> None:
        if not isinstance(registry, Registry):
            raise ConfigError(
                f"ToolScheduler needs a toolbatch.Registry, got {registry!r}; build one with "
                f"toolbatch.default_registry() or toolbatch.Registry([...])"
            )
        self.registry = registry
        self.config = config if config is not None else SchedulerConfig()
        self._producers: dict[str, Producer] = {}
        self._store: ArtifactStore | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._mcp: Any = None

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("this ToolScheduler is already open")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            self._store = self._make_store(stack)
            self._producers = self.registry.producers()
            if self.config.mcp_servers is not None:
                from toolbatch.producers.mcp import McpServers, load_mcp_config

                servers = McpServers(load_mcp_config(self.config.mcp_servers))
                self._mcp = await stack.enter_async_context(servers)
                for producer in servers.producers():
                    name = producer.declaration.name
                    if name in self._producers:
                        log.warning("scheduler.mcp_tool_shadowed", tool=name)
                        continue
                    self._producers[name] = producer
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        log.info(
            "scheduler.opened",
            tools=len(self._producers),
            artifacts=str(self._store.root) if self._store else None,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    def _make_store(self, stack: contextlib.AsyncExitStack) -> ArtifactStore:
        if self.config.store is not None:
            return self.config.store
        if self.config.artifacts_dir is not None:
            return ArtifactStore(self.config.artifacts_dir)
        return ArtifactStore(stack.enter_context(artifact_session(self.config.session_id)))

    @property
    def store(self) -> ArtifactStore:
        """The artifact store of this session."""
        if self._store is None:
            raise RuntimeError("open the scheduler first: async with ToolScheduler(...) as s")
        return self._store

    @property
    def mcp_servers(self) -> Any:
        """The running MCP servers (``None`` when none are configured)."""
        return self._mcp

    def declarations(self) -> list[ToolDeclaration]:
        """Every tool this scheduler can run (registry and MCP), for the model."""
        if self._stack is None:
            return self.registry.declarations()
        return [producer.declaration for producer in self._producers.values()]

    def producer(self, name: str) -> Producer | None:
        """The producer that answers ``name`` in this session."""
        if self._stack is None:
            return self.registry.get(name)
        return self._producers.get(name)

    # -- one batch ------------------------------------------------------------------------

    async def run_batch(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        /,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
        approve: ApprovalCallback | None = None,
        record: bool = True,
        budget: int | Literal["config"] | None = "config",
    ) -> Turn:
        """Run one model turn's calls and return the finalized, recorded turn.

        Args:
            calls: the model's calls in its order (``ToolCall`` objects or their dicts).
            abort: when set, running calls are cancelled (no process left behind) and every
                unfinished call gets a ``cancelled`` response.
            observer: receives live per-call events for display.
            approve: asked before tools that need permission run; a rejection becomes an
                error response the model sees.
            record: ``False`` skips the configured recorder, for a runtime that records
                the whole turn at its own outer boundary.
            budget: this batch's budget instead of the configured ``batch_budget``
                (``None`` disables it), e.g. for a service whose requests carry their own.
        """
        if self._stack is None:
            raise RuntimeError("open the scheduler first: async with ToolScheduler(...) as s")
        if budget == "config":
            budget = self.config.batch_budget
        elif budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise ConfigError(
                f"budget must be an int of characters, None to disable, or 'config', got {budget!r}"
            )
        plans = self._plan(calls)
        await self._execute(plans, abort, observer, approve)
        return await self._complete(plans, record=record, budget=budget)

    def _plan(self, calls: Sequence[ToolCall | Mapping[str, Any]]) -> list[_Plan]:
        if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
            calls = [calls]  # one malformed "batch": answer it
        plans: list[_Plan] = []
        seen: set[str] = set()
        for index, raw in enumerate(calls):
            call, problem = _coerce_call(raw, index)
            ordinal = call.ordinal if call.ordinal is not None else index
            plan = _Plan(ordinal=ordinal, call=call)
            if problem is not None:
                plan.response = ToolCallResponse.failed(call, problem, error_type="invalid_call")
            elif call.invalid is not None:
                plan.response = ToolCallResponse.failed(
                    call,
                    f"invalid tool call {call.name!r}: {call.invalid}",
                    error_type="invalid_args",
                )
            elif call.id in seen:
                plan.response = ToolCallResponse.failed(
                    call,
                    f"duplicate tool call id {call.id!r} in this batch; it was not run again "
                    f"(each call in a batch needs its own id)",
                    status="duplicate",
                    error_type="duplicate_call",
                )
            else:
                producer = self._producers.get(call.name)
                if producer is None:
                    known = ", ".join(sorted(self._producers)) or "none"
                    plan.response = ToolCallResponse.failed(
                        call,
                        f"unknown tool {call.name!r}; available tools: {known}",
                        error_type="unknown_tool",
                    )
                else:
                    plan.producer = producer
            seen.add(call.id)
            plans.append(plan)
        plans.sort(key=lambda plan: plan.ordinal)
        return plans

    async def _execute(
        self,
        plans: list[_Plan],
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> None:
        runnable = [plan for plan in plans if plan.response is None]
        if not runnable:
            return
        aborted = anyio.Event()
        # ``concurrency`` workers take the calls in the model's order: the limit without a
        # semaphore, and a task per worker rather than per call (1,000 calls, 10 tasks).
        # Each call runs in its own cancel scope, cancelled by an abort or its deadline.
        queue = iter(runnable)
        workers = min(self.config.concurrency, len(runnable))
        async with anyio.create_task_group() as outer:
            if abort is not None:
                outer.start_soon(_watch_abort, abort, aborted, runnable)
            outer.start_soon(_watch_deadlines, runnable)
            async with anyio.create_task_group() as tg:
                for _ in range(workers):
                    tg.start_soon(self._work, queue, aborted, observer, approve)
            outer.cancel_scope.cancel()
        for plan in runnable:
            if plan.response is None:
                self._answer_stopped(plan, aborted=aborted.is_set(), observer=observer)

    async def _work(
        self,
        queue: Iterator[_Plan],
        aborted: anyio.Event,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> None:
        for plan in queue:
            if aborted.is_set():
                return  # the rest are answered as cancelled once the batch ends
            call, producer = plan.call, plan.producer
            assert producer is not None
            with anyio.CancelScope() as scope:
                plan.scope = scope
                plan.response = await self._answer(plan, call, producer, observer, approve)
            if plan.response is not None and observer is not None:
                _safe_notify(getattr(observer, "call_finished", None), call, plan.response)

    def _answer_stopped(
        self, plan: _Plan, *, aborted: bool, observer: BatchObserver | None
    ) -> None:
        """The response of a call whose task was cancelled (abort or deadline)."""
        call = plan.call
        if plan.context is not None:
            plan.context.cancelled.set()
        if plan.timed_out or not aborted:
            plan.response = ToolCallResponse.failed(
                call,
                f"tool {call.name!r} did not finish within {plan.timeout_s:g} s and was stopped",
                error_type="timeout",
            )
        else:
            plan.response = ToolCallResponse.failed(
                call,
                f"tool call {call.name!r} was cancelled by the user before it finished",
                status="cancelled",
                error_type="cancelled",
            )
        if observer is not None:
            _safe_notify(getattr(observer, "call_finished", None), call, plan.response)

    async def _answer(
        self,
        plan: _Plan,
        call: ToolCall,
        producer: Producer,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> ToolCallResponse:
        declaration = producer.declaration
        if approve is not None and declaration.needs_permission:
            try:
                allowed = await approve(call, declaration)
            except Exception as exc:
                log.warning("scheduler.approval_failed", call_id=call.id, error=str(exc))
                allowed = False
            if not allowed:
                return ToolCallResponse.failed(
                    call,
                    f"the user did not allow {call.name!r} to run; do not retry it unchanged",
                    error_type="permission_denied",
                )
        progress = getattr(observer, "call_progress", None) if observer is not None else None

        def report(message: str) -> None:
            _safe_notify(progress, call, message)

        # The deadline starts when the producer does: the configured ceiling plus a grace
        # to clean up, or the producer's own timeout (a @tool's) when that is shorter.
        ceiling = self.config.call_timeout
        own = getattr(producer, "timeout_s", None)
        if isinstance(own, int | float) and own < ceiling:
            plan.timeout_s = float(own)
            allowed_s = plan.timeout_s
        else:
            plan.timeout_s = ceiling
            allowed_s = ceiling + BACKSTOP_GRACE_S
        plan.deadline = anyio.current_time() + allowed_s
        context = ProducerContext(
            store=self._store,
            log=_CallLog(call.id, call.name),
            timeout_s=plan.timeout_s,
            progress=report,
            deadline=plan.deadline,
        )
        plan.context = context
        if observer is not None:
            _safe_notify(getattr(observer, "call_started", None), call)
        try:
            result = await producer.run(call, context)
        except Exception as exc:
            log.warning("scheduler.producer_raised", call_id=call.id, error=repr(exc))
            result = ToolResult.failure(
                f"tool {call.name!r} failed: {type(exc).__name__}: {exc}",
                type="tool_crashed",
            )
        if not isinstance(result, ToolResult):
            return ToolCallResponse.failed(
                call,
                f"tool {call.name!r} returned {type(result).__name__}, not a ToolResult",
                error_type="tool_crashed",
            )
        # Generic persistence is opt-in per producer: @tool functions have a threshold;
        # producers that bound their own output (shell, MCP) declare none.
        threshold = getattr(producer, "output_threshold", None)
        if threshold is not None:
            result = await apply_output_threshold(
                result, call=call, store=self._store, threshold=threshold
            )
        return ToolCallResponse.from_result(call, result)

    async def _complete(self, plans: list[_Plan], *, record: bool, budget: int | None) -> Turn:
        assembler = TurnAssembler(
            budget=budget,
            store=self._store,
            recorder=self.config.recorder if record else None,
            outermost=record,
            lifecycle_reminders=self.config.lifecycle_reminders,
        )
        calls: list[ToolCall | None] = []
        for plan in plans:
            assert plan.response is not None
            assembler.add(plan.response, ordinal=plan.ordinal, kind=response_kind(plan.response))
            calls.append(plan.call)
        hooks = self.config.hooks

        async def run_hooks(responses: list[ToolCallResponse]) -> list[ToolCallResponse]:
            batch = build_hook_input(responses, calls, session_id=self.config.session_id)
            output = await run_post_tool_batch_hooks(
                hooks, batch, timeout_s=self.config.hook_timeout
            )
            return apply_hook_output(responses, output)

        return await assembler.complete(post_finalize=run_hooks if hooks else None)


async def _watch_abort(abort: anyio.Event, aborted: anyio.Event, plans: list[_Plan]) -> None:
    """When the user aborts, cancel every call still running."""
    await abort.wait()
    aborted.set()
    for plan in plans:
        if plan.response is None and plan.scope is not None:
            plan.scope.cancel()


async def _watch_deadlines(plans: list[_Plan]) -> None:
    """Cancel each call whose deadline passed (one watcher per batch, not a timer per call)."""
    while True:
        now = anyio.current_time()
        upcoming = math.inf
        for plan in plans:
            deadline = plan.deadline
            if deadline is None or plan.response is not None or plan.timed_out:
                continue
            if now >= deadline:
                plan.timed_out = True
                if plan.scope is not None:
                    plan.scope.cancel()
            else:
                upcoming = min(upcoming, deadline)
        await anyio.sleep(max(0.0, min(upcoming - now, DEADLINE_POLL_S)))


def _coerce_call(raw: object, index: int) -> tuple[ToolCall, str | None]:
    """The call, or a stand-in plus the reason it is malformed."""
    if isinstance(raw, ToolCall):
        return raw, None
    if isinstance(raw, Mapping):
        try:
            return ToolCall.model_validate(raw), None
        except ValidationError as exc:
            raw_id = raw.get("id")
            raw_name = raw.get("name")
            stand_in = ToolCall.model_construct(
                id=raw_id if isinstance(raw_id, str) and raw_id else f"invalid-call-{index}",
                name=raw_name if isinstance(raw_name, str) and raw_name else "invalid_call",
                args={},
                ordinal=index,
                prompt_id=None,
            )
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'call'}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            return stand_in, f"malformed tool call at position {index}: {problems}"
    stand_in = ToolCall.model_construct(
        id=f"invalid-call-{index}", name="invalid_call", args={}, ordinal=index, prompt_id=None
    )
    return stand_in, (
        f"malformed tool call at position {index}: expected an object with id, name and "
        f"args, got {type(raw).__name__}"
    )
