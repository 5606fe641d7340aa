"""The scheduler: one model turn's batch of tool calls, run once and completed once.

A turn is two steps, always in this order and each exactly once:

1. ``execute(calls)`` validates and plans the calls (unknown tools, invalid calls and
   repeated ids are answered in place), runs the rest concurrently under the concurrency
   limit, each with a deadline, and returns one response per call in the model's order.
   Nothing is bounded yet; bad input never escapes, nor does anything a tool raises.
2. ``complete_turn(responses)`` is the one completion, at the outermost boundary: finalize,
   PostToolBatch hooks, finalize, send guard, record. It returns the ``Turn`` whose parts
   are exactly what is recorded and sent.

``run_batch(calls)`` is ``execute`` then ``complete_turn``. A runtime that answers some
calls itself (duplicates, skipped, synthetic) executes the rest, merges everything in the
model's order and completes once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self

import anyio
import anyio.lowlevel
import structlog
from pydantic import ValidationError

from toolbatch._core import (
    BatchObserver,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolResult,
    Turn,
    completed_turn,
)
from toolbatch.artifacts import ArtifactStore, artifact_session, new_session_id
from toolbatch.errors import ConfigError, RecorderError
from toolbatch.finalize import (
    Budget,
    check_budget,
    enforce_send_budget,
    finalize_tool_responses,
)
from toolbatch.hooks import (
    apply_hook_output,
    build_hook_input,
    hook_input_chars,
    run_post_tool_batch_hooks,
)
from toolbatch.producers import (
    UNWATCHED_OUTPUT,
    UNWATCHED_PROGRESS,
    OutputCallback,
    ProcessPolicy,
    Producer,
    ProducerContext,
    ProgressCallback,
    apply_output_threshold,
)
from toolbatch.recorder import JsonlRecorder, Recorder
from toolbatch.sandbox import open_sandbox
from toolbatch.scheduler._config import (
    USE_CONFIG,
    SchedulerConfig,
    UseConfig,
)
from toolbatch.scheduler._gate import (
    Admitted,
    ApprovalCallback,
    CallGate,
    ask_approval,
    refusal,
)
from toolbatch.scheduler._pending import PendingTurn
from toolbatch.scheduler._protection import session_protected_paths
from toolbatch.scheduler._registry import Registry
from toolbatch.telemetry import CallTelemetry, begin_turn, call_scope, current_turn

__all__ = ["ToolScheduler"]

log = structlog.get_logger("toolbatch.scheduler")

BACKSTOP_GRACE_S: Final = 10.0
"""Time a producer gets past the ceiling to clean up and answer before it is cut off."""
YIELD_EVERY_CALLS: Final = 16
"""A worker lets the event loop run at least once per this many calls it answers."""
HOOK_CONTEXT_TOOL: Final = "hook_context"
"""The name a batch's own text (hook context, a stop note) is persisted under when cut."""
CALL_HOOK_STOP_NOTE: Final = "A hook stopped the agent after these tool results: "


@dataclass(slots=True, eq=False)
class _Route:
    """How one tool's calls run, read from its producer once per batch (not per call)."""

    producer: Producer
    timeout_s: float
    """What the call is told it may take (``ProducerContext.timeout_s``)."""
    allowed_s: float
    """When the runtime stops it: ``timeout_s``, plus a grace to clean up when that is the
    configured ceiling rather than the producer's own, shorter timeout."""
    output_threshold: int | None
    needs_permission: bool
    """Whether an ``approve`` callback is asked before a call runs (no rules, no hooks)."""


@dataclass(slots=True, eq=False)
class _Plan:
    """One call's place in the batch and, once known, its response."""

    ordinal: int
    call: ToolCall
    route: _Route | None = None
    response: ToolCallResponse | None = None
    context: ProducerContext | None = None
    deadline: float | None = None
    timeout_s: float = 0.0
    timed_out: bool = False
    started: bool = False
    span: CallTelemetry | None = None


@dataclass(slots=True, eq=False)
class _Worker:
    """One of a batch's workers: the cancel scope its calls run in, and the call it runs.

    The scope spans the worker's calls, not one call (a cancel scope per call cost more
    than the rest of the scheduler's work on a call): a call's deadline cancels it, the
    worker answers that call as timed out and opens a new scope for the next.
    """

    scope: anyio.CancelScope | None = None
    plan: _Plan | None = None


class _Deadlines:
    """The deadlines of one batch's running calls.

    On asyncio one timer of the event loop serves the whole batch: it is set for the
    earliest deadline of a running call and, when it fires, cancels the workers whose
    call is past its deadline, then sets itself for the next one (calls started later
    mostly end later, so a batch of 1,000 calls usually sets it once). Elsewhere each
    running call's deadline is its worker scope's own.
    """

    __slots__ = ("_handle", "_loop", "_when", "_workers")

    def __init__(self) -> None:
        self._loop = _asyncio_loop()
        self._workers: list[_Worker] = []
        self._handle: asyncio.TimerHandle | None = None
        self._when = math.inf

    def now(self) -> float:
        """The time on the clock deadlines are set on (``anyio.current_time()``)."""
        return self._loop.time() if self._loop is not None else anyio.current_time()

    def worker(self) -> _Worker:
        """A new worker whose running call this batch's timer watches."""
        worker = _Worker()
        self._workers.append(worker)
        return worker

    def start(self, worker: _Worker, deadline: float) -> None:
        """``worker``'s call is cancelled at ``deadline`` unless it has answered by then."""
        if self._loop is None:
            assert worker.scope is not None
            worker.scope.deadline = deadline
        elif deadline < self._when:
            if self._handle is not None:
                self._handle.cancel()
            self._when = deadline
            self._handle = self._loop.call_at(deadline, self._expire)

    def stop(self, worker: _Worker) -> None:
        """``worker``'s call has answered: its deadline no longer applies."""
        worker.plan = None
        if self._loop is None and worker.scope is not None:
            worker.scope.deadline = math.inf

    def _expire(self) -> None:
        assert self._loop is not None
        self._handle = None
        self._when = math.inf
        now = self._loop.time()
        upcoming = math.inf
        for worker in self._workers:
            plan = worker.plan
            if plan is None or plan.deadline is None:
                continue
            if plan.deadline <= now:
                if worker.scope is not None:
                    worker.scope.cancel()
            elif plan.deadline < upcoming:
                upcoming = plan.deadline
        if upcoming < math.inf:
            self._when = upcoming
            self._handle = self._loop.call_at(upcoming, self._expire)

    def close(self) -> None:
        """The batch has ended: no timer is left behind."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._when = math.inf


@dataclass(slots=True, eq=False)
class _Batch:
    """What every worker of one batch shares."""

    aborted: anyio.Event
    deadlines: _Deadlines
    reporter: _Reporter
    approve: ApprovalCallback | None
    new_event: Callable[[], anyio.Event]
    """Makes an ``anyio.Event`` of the running backend directly (``anyio.Event()`` finds
    the backend anew each time: most of a ``ProducerContext``'s cost)."""
    new_scope: Callable[[], anyio.CancelScope]
    """Makes an ``anyio.CancelScope`` of the running backend directly, likewise."""
    abortable: bool
    """Whether the caller can abort the batch (else ``aborted`` is never set)."""
    gated: bool
    """Whether every call passes the gate before it runs (PreToolUse hooks, rules)."""
    post_hooks: bool
    """Whether PostToolUse hooks see every call's response."""


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio event loop, or ``None`` on another anyio backend."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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


class _Reporter:
    """Reports each call of a batch to the observer exactly once: started, then finished."""

    __slots__ = ("_finished", "_output", "_progress", "_started", "telemetry")

    def __init__(self, observer: BatchObserver | None) -> None:
        self._started = getattr(observer, "call_started", None)
        self._progress = getattr(observer, "call_progress", None)
        self._output = getattr(observer, "call_output", None)
        self._finished = getattr(observer, "call_finished", None)
        self.telemetry = current_turn()  # None unless spans or metrics are recorded

    def started(self, plan: _Plan) -> None:
        if not plan.started:
            plan.started = True
            if self._started is not None:
                _safe_notify(self._started, plan.call)

    @property
    def listens_to_progress(self) -> bool:
        """Whether the observer takes progress messages (else producers need not send any)."""
        return self._progress is not None

    def progress(self, call: ToolCall, message: str) -> None:
        _safe_notify(self._progress, call, message)

    def output_callback(self, call: ToolCall) -> OutputCallback:
        """What the producer hands its output text to (nothing listens: it decodes none)."""
        send = self._output
        if send is None:
            return UNWATCHED_OUTPUT

        def output(text: str) -> None:
            _safe_notify(send, call, text)

        return output

    def finished(self, plan: _Plan) -> None:
        self.started(plan)
        if self.telemetry is not None:
            self.telemetry.call_finished(plan.span, plan.call, plan.response)
        if self._finished is not None:
            _safe_notify(self._finished, plan.call, plan.response)


class ToolScheduler:
    """Runs batches of tool calls. Use it as an async context manager.

    ``async with ToolScheduler(registry, config) as scheduler:`` makes the artifact store
    and starts the MCP servers of the configuration in the background (``await
    scheduler.wait_for_tools()`` for the full tool list); ``await scheduler.run_batch(calls)``
    returns a ``Turn`` per batch; leaving the block stops the servers.
    """

    def __init__(self, registry: Registry, config: SchedulerConfig | None = None) -> None:
        if not isinstance(registry, Registry):
            raise ConfigError(
                f"ToolScheduler needs a toolbatch.Registry, got {registry!r}; build one with "
                f"toolbatch.default_registry() or toolbatch.Registry([...])"
            )
        if config is not None and not isinstance(config, SchedulerConfig):
            raise ConfigError(
                f"config must be a toolbatch.SchedulerConfig, got {config!r}; build one with "
                f"toolbatch.SchedulerConfig(batch_budget=...)"
            )
        self.registry = registry
        self.config = config if config is not None else SchedulerConfig()
        self._producers: dict[str, Producer] = {}
        self._store: ArtifactStore | None = None
        self._policy: ProcessPolicy | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._mcp: Any = None
        # The running backend's own classes, found once when the session opens:
        # ``anyio.Event()`` and ``anyio.CancelScope()`` look the backend up on every call.
        self._new_event: Callable[[], anyio.Event] = anyio.Event
        self._new_scope: Callable[[], anyio.CancelScope] = anyio.CancelScope
        # Hooks always get a session id (Claude Code's always has one); the artifact
        # folder takes the same id.
        self._session_id = self.config.session_id or new_session_id()
        self._gate = CallGate.build(
            self.config.event_hooks(),
            self.config.permissions,
            hook_timeout_s=self.config.hook_timeout,
            session_id=self._session_id,
            transcript_path=_transcript_path(self.config.recorder),
            input_chars=hook_input_chars(self.config.budget),
        )
        self._batch_hooks = self.config.post_tool_batch_hooks()

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._stack is not None:
            raise RuntimeError("this ToolScheduler is already open")
        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            self._store = self._make_store(stack)
            # The shell's sandbox and environment, resolved once for the session.
            self._policy = stack.enter_context(
                open_sandbox(
                    self.config,
                    protected_paths=session_protected_paths(
                        self.config, (self._store.root, self._store.fallback_dir)
                    ),
                )
            )
            self._producers = self.registry.producers()
            mcp_config = self.config.mcp_config()
            if mcp_config is not None:
                await self._open_mcp(stack, mcp_config)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        self._new_event = type(anyio.Event())
        self._new_scope = type(anyio.CancelScope())
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

    async def _open_mcp(self, stack: contextlib.AsyncExitStack, mcp_config: Any) -> None:
        """Start the MCP servers, in the background. Their tools are looked up live
        (``_lookup``): a server's tools join when it is ready, the lists change on
        ``tools/list_changed`` and restarts, a call to a server still starting waits for
        that server only, and failed servers' names answer why."""
        from toolbatch.producers.mcp import McpServers

        servers = McpServers(
            mcp_config, start_timeout_s=self.config.mcp_startup_timeout, wait_for_start=False
        )
        self._mcp = await stack.enter_async_context(servers)
        for producer in servers.producers():
            if producer.declaration.name in self._producers:
                log.warning("scheduler.mcp_tool_shadowed", tool=producer.declaration.name)

    def _lookup(self, name: str) -> Producer | None:
        producer = self._producers.get(name)
        if producer is None and self._mcp is not None:
            producer = self._mcp.lookup(name)
        return producer

    def _available(self) -> dict[str, Producer]:
        """Every tool offered now: the registry's, then the MCP servers' it does not shadow,
        minus tools a bare deny rule removes from the model's view."""
        producers = dict(self._producers)
        if self._mcp is not None:
            for producer in self._mcp.producers():
                producers.setdefault(producer.declaration.name, producer)
        permissions = self._gate.permissions
        if permissions.deny:
            producers = {n: p for n, p in producers.items() if permissions.hidden(n) is None}
        return producers

    def _make_store(self, stack: contextlib.AsyncExitStack) -> ArtifactStore:
        if self.config.store is not None:
            return self.config.store
        if self.config.artifacts_dir is not None:
            return ArtifactStore(self.config.artifacts_dir)
        return ArtifactStore(stack.enter_context(artifact_session(self._session_id)))

    def _check_open(self) -> None:
        if self._stack is None:
            raise RuntimeError("open the scheduler first: async with ToolScheduler(...) as s")

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

    async def wait_for_tools(self) -> list[ToolDeclaration]:
        """Wait until every MCP server has started or failed (each within its start-up
        timeout), then return ``declarations()``: what a model's tool list needs. The
        servers start in the background when the scheduler opens, so calls to the shell,
        custom tools and ready servers never wait for a slow one."""
        self._check_open()
        if self._mcp is not None:
            await self._mcp.wait_started()
        return self.declarations()

    def declarations(self) -> list[ToolDeclaration]:
        """Every tool this scheduler can run now (registry and MCP), for the model; an
        MCP server still starting adds its tools once ready (``wait_for_tools``)."""
        if self._stack is None:
            return self.registry.declarations()
        return [producer.declaration for producer in self._available().values()]

    def producer(self, name: str) -> Producer | None:
        """The producer that answers ``name`` in this session."""
        if self._stack is None:
            return self.registry.get(name)
        return self._lookup(name)

    # -- one turn -------------------------------------------------------------------------

    async def run_batch(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        /,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
        approve: ApprovalCallback | None = None,
        budget: Budget | float | UseConfig = USE_CONFIG,
    ) -> Turn:
        """Run one model turn's calls and complete the turn: ``execute``, then ``complete_turn``.

        Args:
            calls: the model's calls in its order (``ToolCall`` objects or their dicts).
            abort: when set, running calls are cancelled (no process left behind) and every
                unfinished call gets a ``cancelled`` response.
            observer: receives live per-call events for display.
            approve: asked before tools that need permission run; a rejection becomes an
                error response the model sees.
            budget: this turn's budget instead of the configured one (a positive int, or
                ``None`` / ``math.inf`` for none), e.g. for a service whose requests carry
                their own.

        Raises:
            ConfigError: ``budget`` is invalid (checked before anything runs).
            RecorderError: the configured recorder failed; ``.turn`` holds the completed
                turn, which was not recorded.
        """
        limit = self._limit(budget)  # checked before anything runs
        pending = await self.execute(calls, abort=abort, observer=observer, approve=approve)
        return await self._complete_turn(pending, limit, USE_CONFIG)

    async def execute(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        /,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
        approve: ApprovalCallback | None = None,
    ) -> PendingTurn:
        """Run the calls and answer every one of them, in the model's call order.

        Calls that cannot run are answered in place (unknown tool, malformed or invalid
        call, repeated id, denied). Nothing is bounded here: the returned turn is completed
        once with :meth:`complete_turn`, after the runtime added what it answered itself
        (``PendingTurn.add``). Nothing a tool raises escapes (``SystemExit`` included);
        every call is reported to ``observer`` exactly once (started, then finished).
        """
        self._check_open()
        telemetry = begin_turn(self.config.session_id)
        if telemetry is None:
            plans = await self._run_plans(calls, abort, observer, approve)
        else:
            with telemetry.active():
                try:
                    plans = await self._run_plans(calls, abort, observer, approve)
                except BaseException as exc:
                    telemetry.end_failed(exc)
                    raise
            telemetry.mark_executed()
        responses: list[ToolCallResponse] = []
        ordinals: list[int] = []
        for plan in plans:
            assert plan.response is not None
            responses.append(plan.response)
            ordinals.append(plan.ordinal)
        return PendingTurn(responses, ordinals=ordinals, telemetry=telemetry)

    async def _run_plans(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> list[_Plan]:
        plans = self._plan(calls)
        reporter = _Reporter(observer)
        for plan in plans:
            if plan.response is not None:
                reporter.finished(plan)
        await self._execute(plans, abort, reporter, approve)
        return plans

    async def complete_turn(
        self,
        pending: PendingTurn | Sequence[ToolCallResponse],
        /,
        *,
        budget: Budget | float | UseConfig = USE_CONFIG,
        recorder: Recorder | UseConfig | None = USE_CONFIG,
    ) -> Turn:
        """Complete one turn, once: finalize, PostToolBatch hooks, finalize, send guard, record.

        Args:
            pending: the turn :meth:`execute` returned, with the responses the runtime
                answered itself added in the model's order; or, for a turn nothing
                executed, the runtime's responses in call order.
            budget: this turn's budget instead of the configured one.
            recorder: where the turn is recorded instead of the configured recorder
                (``None``: nowhere), e.g. an agent loop's transcript.

        Returns:
            The turn: the responses as the model receives them, the parts to send
            (responses' parts, then the batch's own text: hook context, the stop note) and
            ``stop_reason`` when a hook stopped the agent. What is returned is what was
            recorded.

        Raises:
            ConfigError: ``budget`` is invalid.
            TurnAlreadyCompleted: ``pending`` was completed before (a turn completes once).
            RecorderError: the recorder failed; ``.turn`` holds the completed turn, which
                was not recorded.
        """
        self._check_open()
        return await self._complete_turn(pending, self._limit(budget), recorder)

    def _limit(self, budget: Budget | float | UseConfig) -> Budget:
        """A turn's budget as given (checked once, here) or the configured one."""
        if isinstance(budget, UseConfig):
            return self.config.budget
        return check_budget(budget, name="budget")

    async def _complete_turn(
        self,
        pending: PendingTurn | Sequence[ToolCallResponse],
        limit: Budget,
        recorder: Recorder | UseConfig | None,
    ) -> Turn:
        if not isinstance(pending, PendingTurn):
            pending = PendingTurn.answered(pending)
        pending.claim()
        telemetry = pending.telemetry
        if telemetry is None:
            telemetry = begin_turn(self.config.session_id)
            if telemetry is None:
                return await self._complete(pending.responses, limit, recorder)
        with telemetry.active():
            try:
                turn = await self._complete(pending.responses, limit, recorder)
            except BaseException as exc:
                telemetry.end_failed(exc)
                raise
        telemetry.end_completed(pending.answered_by_runtime(), turn, limit)
        return turn

    async def _complete(
        self,
        responses: list[ToolCallResponse],
        limit: Budget,
        recorder: Recorder | UseConfig | None,
    ) -> Turn:
        record = self.config.recorder if isinstance(recorder, UseConfig) else recorder
        lifecycle = self.config.lifecycle
        # What the calls' own hooks said (PreToolUse, PostToolUse) is the turn's own text.
        context, stop_reason = _call_hook_text(responses)
        finalized = await finalize_tool_responses(
            responses, budget=limit, store=self._store, lifecycle_tools=lifecycle
        )
        changed = False
        if self._batch_hooks:
            batch = build_hook_input(
                finalized,
                session_id=self._session_id,
                transcript_path=_transcript_path(record) or self._gate.transcript_path,
                permission_mode=self._gate.permission_mode,
                input_chars=hook_input_chars(limit),
            )
            output = await run_post_tool_batch_hooks(
                self._batch_hooks, batch, timeout_s=self.config.hook_timeout
            )
            outcome = apply_hook_output(finalized, output)
            finalized, changed = outcome.responses, output is not None
            context = [*context, *outcome.context]
            stop_reason = stop_reason or outcome.stop_reason
        context_count = len(context)
        if changed or context:
            finalized = await finalize_tool_responses(
                [*finalized, *_context_responses(context)],
                budget=limit,
                store=self._store,
                lifecycle_tools=lifecycle,
            )
        turn = _guarded_turn(finalized, context_count, limit, lifecycle, stop_reason)
        if record is not None:
            try:
                await record.record_turn(turn)
            except RecorderError as exc:
                exc.turn = turn
                raise
        log.info(
            "turn.completed",
            responses=len(turn.responses),
            chars=turn.content_length,
            budget=limit,
            stopped=stop_reason is not None,
        )
        return turn

    # -- execution ------------------------------------------------------------------------

    def _plan(self, calls: Sequence[ToolCall | Mapping[str, Any]]) -> list[_Plan]:
        if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
            calls = [calls]  # one malformed "batch": answer it
        plans: list[_Plan] = []
        seen: set[str] = set()
        routes: dict[str, _Route | None] = {}
        in_order = True
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
                name = call.name
                if name in routes:
                    route = routes[name]
                else:
                    route = routes[name] = self._route(name)
                if route is None:
                    known = ", ".join(sorted(self._available())) or "none"
                    plan.response = ToolCallResponse.failed(
                        call,
                        f"unknown tool {name!r}; available tools: {known}",
                        error_type="unknown_tool",
                    )
                else:
                    plan.route = route
            seen.add(call.id)
            if plans and ordinal < plans[-1].ordinal:
                in_order = False
            plans.append(plan)
        if not in_order:
            plans.sort(key=lambda plan: plan.ordinal)
        return plans

    def _route(self, name: str) -> _Route | None:
        """How calls of tool ``name`` run in this batch (``None``: no such tool)."""
        producer = self._lookup(name)
        if producer is None:
            return None
        # The deadline is the configured ceiling plus a grace to clean up, or the
        # producer's own timeout (a @tool's) when that is shorter.
        ceiling = self.config.call_timeout
        declaration = producer.declaration
        own = declaration.timeout_s
        if own is not None and own < ceiling:
            timeout_s = allowed_s = float(own)
        else:
            timeout_s, allowed_s = ceiling, ceiling + BACKSTOP_GRACE_S
        return _Route(
            producer,
            timeout_s=timeout_s,
            allowed_s=allowed_s,
            # Generic persistence is opt-in per producer: @tool functions declare a
            # threshold; producers that bound their own output (shell, MCP) declare none.
            output_threshold=declaration.output_threshold,
            needs_permission=declaration.needs_permission and not declaration.trusted,
        )

    async def _execute(
        self,
        plans: list[_Plan],
        abort: anyio.Event | None,
        reporter: _Reporter,
        approve: ApprovalCallback | None,
    ) -> None:
        runnable = [plan for plan in plans if plan.response is None]
        if not runnable:
            return
        aborted = self._new_event()
        deadlines = _Deadlines()
        batch = _Batch(
            aborted,
            deadlines,
            reporter,
            approve,
            new_event=self._new_event,
            new_scope=self._new_scope,
            abortable=abort is not None,
            gated=self._gate.checks_before,
            post_hooks=self._gate.has_post,
        )
        # ``concurrency`` workers take the calls in the model's order: the limit without a
        # semaphore, and a task per worker rather than per call (1,000 calls, 10 tasks).
        # A call's deadline cancels its worker's scope (``_Worker``, ``_Deadlines``); an
        # abort cancels the workers' task group. A lone worker without an abort to watch
        # runs in place: a one-call batch starts no task at all.
        queue = iter(runnable)
        workers = min(self.config.concurrency, len(runnable))
        try:
            if abort is None and workers == 1:
                await self._work(queue, batch)
            elif abort is None:
                async with anyio.create_task_group() as tg:
                    for _ in range(workers):
                        tg.start_soon(self._work, queue, batch)
            else:
                async with anyio.create_task_group() as outer:
                    async with anyio.create_task_group() as tg:
                        outer.start_soon(_watch_abort, abort, aborted, tg.cancel_scope)
                        for _ in range(workers):
                            tg.start_soon(self._work, queue, batch)
                    outer.cancel_scope.cancel()
        finally:
            deadlines.close()
        for plan in runnable:
            if plan.response is None:
                self._answer_stopped(plan, aborted=aborted.is_set())
                reporter.finished(plan)

    async def _work(
        self,
        queue: Iterator[_Plan],
        batch: _Batch,
    ) -> None:
        aborted, deadlines, reporter = batch.aborted, batch.deadlines, batch.reporter
        abortable, telemetry = batch.abortable, reporter.telemetry
        worker = deadlines.worker()
        answered = 0
        while True:
            with batch.new_scope() as scope:
                worker.scope = scope
                for plan in queue:
                    if abortable and aborted.is_set():
                        return  # the rest are answered as cancelled once the batch ends
                    answered += 1
                    if answered % YIELD_EVERY_CALLS == 0:
                        # Calls that never suspend (a trivial async tool) must not starve
                        # the rest of the loop: the abort watcher, an observer's writer.
                        await anyio.lowlevel.checkpoint()
                    worker.plan = plan
                    span = None if telemetry is None else telemetry.start_call(plan.call)
                    if span is None:
                        plan.response = await self._answer(plan, worker, batch)
                    else:
                        plan.span = span
                        with call_scope(span):
                            plan.response = await self._answer(plan, worker, batch)
                    deadlines.stop(worker)
                    reporter.finished(plan)
                    # An answered call needs its context no more: a batch of 100,000
                    # calls should not hold 100,000 of them until it ends.
                    plan.context = None
                    if scope.cancel_called:
                        break  # a deadline came as the call answered: a new scope
                else:
                    return
            stopped = worker.plan
            if stopped is not None:
                # The scope caught its cancellation: the call's deadline passed (an abort
                # cancels the task group, which this scope does not catch).
                deadlines.stop(worker)
                stopped.timed_out = True

    def _answer_stopped(self, plan: _Plan, *, aborted: bool) -> None:
        """The response of a call whose task was cancelled (abort or deadline)."""
        call = plan.call
        if plan.context is not None:
            plan.context.cancelled.set()
        partial = plan.context.partial_result if plan.context is not None else None
        if plan.timed_out or not aborted:
            plan.response = ToolCallResponse.failed(
                call,
                f"tool {call.name!r} did not finish within {plan.timeout_s:g} s and was stopped",
                error_type="timeout",
            )
        elif partial is not None:
            # The producer kept what the call produced before the abort (the shell's
            # partial output and artifact): answer with it rather than a bare message.
            plan.response = ToolCallResponse.from_result(call, partial, status="cancelled")
        else:
            plan.response = ToolCallResponse.failed(
                call,
                f"tool call {call.name!r} was cancelled by the user before it finished",
                status="cancelled",
                error_type="cancelled",
            )

    async def _answer(
        self,
        plan: _Plan,
        worker: _Worker,
        batch: _Batch,
    ) -> ToolCallResponse:
        call, route = plan.call, plan.route
        assert route is not None
        producer = route.producer
        reporter = batch.reporter
        # Step: PreToolUse hooks, permission rules, approval (toolbatch.scheduler._gate).
        admitted: Admitted | None = None
        if batch.gated or (route.needs_permission and batch.approve is not None):
            checked = await self._admit(call, producer.declaration, batch.approve)
            if isinstance(checked, ToolCallResponse):
                return checked
            admitted, call = checked, checked.call

        progress: ProgressCallback
        if reporter.listens_to_progress:

            def report(message: str) -> None:
                reporter.progress(call, message)

            progress = report
        else:
            # The context keeps its default callback, which producers can tell from one
            # that listens: the MCP producer then asks for no progress at all.
            progress = UNWATCHED_PROGRESS

        # The deadline starts when the producer does.
        deadlines = batch.deadlines
        plan.timeout_s = route.timeout_s
        started = deadlines.now()
        plan.deadline = deadline = started + route.allowed_s
        deadlines.start(worker, deadline)  # the call is cancelled there
        context = ProducerContext(
            store=self._store,
            log=_CallLog(call.id, call.name),
            cancelled=batch.new_event(),
            timeout_s=route.timeout_s,
            progress=progress,
            output=reporter.output_callback(call),
            deadline=deadline,
            process_policy=self._policy,
        )
        plan.context = context
        reporter.started(plan)
        try:
            result = await producer.run(call, context)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt from a tool: its failure
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
        if route.output_threshold is not None:
            result = await apply_output_threshold(
                result,
                call=call,
                store=self._store,
                threshold=route.output_threshold,
                deadline=deadline,  # a finished call keeps its output: the persist gives up first
            )
        response = ToolCallResponse.from_result(call, result)
        # Step: PostToolUse / PostToolUseFailure hooks; what they say rides on the response.
        if batch.post_hooks or (admitted is not None and (admitted.notes or admitted.stop)):
            elapsed_ms = round((deadlines.now() - started) * 1000)
            admitted = admitted if admitted is not None else Admitted(call)
            response = await self._gate.after(call, response, admitted, elapsed_ms)
        return response

    async def _admit(
        self, call: ToolCall, declaration: ToolDeclaration, approve: ApprovalCallback | None
    ) -> Admitted | ToolCallResponse:
        """The call to run, or its answer in place (denied, not approved, bad new input),
        when the gate or the approval callback has a say."""
        if self._gate.checks_before:
            return await self._gate.before(call, declaration, approve)
        assert approve is not None
        refused = refusal(call, await ask_approval(approve, call, declaration))
        if refused is not None:
            return refused
        return Admitted(call)


def _call_hook_text(responses: Sequence[ToolCallResponse]) -> tuple[list[str], str | None]:
    """The per-call hooks' notes in call order, and the first stop they asked for (its note
    after them)."""
    notes: list[str] = []
    stop: str | None = None
    for response in responses:
        if response.hook_notes:
            notes.extend(response.hook_notes)
        if response.hook_stop is not None and stop is None:
            stop = response.hook_stop
    if stop is not None:
        notes.append(CALL_HOOK_STOP_NOTE + stop)
    return notes, stop


def _context_responses(texts: Sequence[str]) -> list[ToolCallResponse]:
    """The batch's own text, as responses the finalizer can bound and persist on their own."""
    return [
        ToolCallResponse(
            call_id=f"{HOOK_CONTEXT_TOOL}-{index}",
            name=HOOK_CONTEXT_TOOL,
            parts=[TextPart(text=text)],
        )
        for index, text in enumerate(texts, 1)
    ]


def _guarded_turn(
    finalized: list[ToolCallResponse],
    context_count: int,
    limit: Budget,
    lifecycle: frozenset[str],
    stop_reason: str | None,
) -> Turn:
    """The turn after the send guard (a no-op for a finalized batch), context split off."""
    responses = finalized[: len(finalized) - context_count]
    parts: list[Part] = [part for response in finalized for part in response.parts]
    guarded = enforce_send_budget(parts, limit, lifecycle_tools=lifecycle)
    if guarded is not parts:
        # The guard only rewrites parts in place (same count, same order): split it back.
        rebuilt: list[ToolCallResponse] = []
        offset = 0
        for response in responses:
            own = guarded[offset : offset + len(response.parts)]
            offset += len(response.parts)
            rebuilt.append(response if own == response.parts else response.with_parts(own))
        responses = rebuilt
    return completed_turn(responses, guarded, stop_reason)


async def _watch_abort(
    abort: anyio.Event, aborted: anyio.Event, workers: anyio.CancelScope
) -> None:
    """When the user aborts, cancel every call still running (the workers' task group)."""
    await abort.wait()
    aborted.set()
    workers.cancel()


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


def _transcript_path(recorder: Recorder | None) -> str | None:
    """Where the session is recorded, for hooks' ``transcript_path`` (``None``: nowhere)."""
    return str(recorder.path) if isinstance(recorder, JsonlRecorder) else None
