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

import contextlib
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
import structlog

from toolbatch._core import (
    BatchObserver,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
)
from toolbatch.artifacts import ArtifactStore, artifact_session, new_session_id
from toolbatch.errors import ConfigError
from toolbatch.finalize import Budget, check_budget
from toolbatch.hooks import hook_input_chars
from toolbatch.producers import ProcessPolicy, Producer
from toolbatch.recorder import Recorder
from toolbatch.sandbox import open_sandbox
from toolbatch.scheduler._completion import TurnCompleter, transcript_path
from toolbatch.scheduler._config import (
    USE_CONFIG,
    SchedulerConfig,
    UseConfig,
)
from toolbatch.scheduler._execution import CallRunner, Plan
from toolbatch.scheduler._gate import ApprovalCallback, CallGate
from toolbatch.scheduler._pending import PendingTurn
from toolbatch.scheduler._protection import session_protected_paths
from toolbatch.scheduler._registry import Registry
from toolbatch.telemetry import TurnTelemetry, begin_turn

__all__ = ["ToolScheduler"]

log = structlog.get_logger("toolbatch.scheduler")


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
        self._runner: CallRunner | None = None
        self._completer: TurnCompleter | None = None
        # Hooks always get a session id (Claude Code's always has one); the artifact
        # folder takes the same id.
        self._session_id = self.config.session_id or new_session_id()
        self._gate = CallGate.build(
            self.config.event_hooks(),
            self.config.permissions,
            hook_timeout_s=self.config.hook_timeout,
            session_id=self._session_id,
            transcript_path=transcript_path(self.config.recorder),
            input_chars=hook_input_chars(self.config.budget),
        )
        self._batch_hooks = self.config.post_tool_batch_hooks()
        self._budget = self.config.budget  # the config is frozen: read once, not per turn

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
        self._runner = CallRunner(
            self.config,
            self._gate,
            store=self._store,
            policy=self._policy,
            lookup=self._lookup,
            available=self._available,
            # The running backend's own classes, found once: ``anyio.Event()`` and
            # ``anyio.CancelScope()`` look the backend up on every call.
            new_event=type(anyio.Event()),
            new_scope=type(anyio.CancelScope()),
        )
        self._completer = TurnCompleter(
            self.config,
            self._gate,
            store=self._store,
            session_id=self._session_id,
            batch_hooks=self._batch_hooks,
        )
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
        if self._runner is not None:
            self._runner.close()
        self._runner = self._completer = None
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
        # Checked before anything runs (the configured budget was checked with the config).
        limit = self._budget if budget is USE_CONFIG else self._limit(budget)
        plans, telemetry = await self._run(calls, abort, observer, approve)
        if telemetry is None:
            # Untraced, and the turn never leaves here: completed at once, with no
            # ``PendingTurn`` to hand out and claim (``complete_turn``'s very steps).
            completer = self._completer
            assert completer is not None  # open: ``_run`` checked
            return await completer.complete(_responses(plans), limit, self.config.recorder)
        return await self._complete_turn(_pending(plans, telemetry), limit, USE_CONFIG)

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
        plans, telemetry = await self._run(calls, abort, observer, approve)
        return _pending(plans, telemetry)

    async def _run(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> tuple[list[Plan], TurnTelemetry | None]:
        """``execute``'s work: the answered plans, and the turn's span if one was started."""
        runner = self._runner
        if runner is None:
            raise RuntimeError("open the scheduler first: async with ToolScheduler(...) as s")
        telemetry = begin_turn(self.config.session_id)
        if telemetry is None:
            return await runner.run(calls, abort, observer, approve), None
        with telemetry.active():
            try:
                plans = await runner.run(calls, abort, observer, approve)
            except BaseException as exc:
                telemetry.end_failed(exc)
                raise
        telemetry.mark_executed()
        return plans, telemetry

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
            return self._budget
        return check_budget(budget, name="budget")

    async def _complete_turn(
        self,
        pending: PendingTurn | Sequence[ToolCallResponse],
        limit: Budget,
        recorder: Recorder | UseConfig | None,
    ) -> Turn:
        completer = self._completer
        if completer is None:
            raise RuntimeError("open the scheduler first: async with ToolScheduler(...) as s")
        if not isinstance(pending, PendingTurn):
            pending = PendingTurn.answered(pending)
        pending.claim()
        record = self.config.recorder if isinstance(recorder, UseConfig) else recorder
        telemetry = pending.telemetry
        if telemetry is None:
            # A turn executed untraced is completed untraced: nothing records (asked anew
            # only for a turn nothing executed here).
            telemetry = None if pending._untraced else begin_turn(self.config.session_id)
            if telemetry is None:
                return await completer.complete(pending.responses, limit, record)
        with telemetry.active():
            try:
                turn = await completer.complete(pending.responses, limit, record)
            except BaseException as exc:
                telemetry.end_failed(exc)
                raise
        telemetry.end_completed(pending.answered_by_runtime(), turn, limit)
        return turn


def _responses(plans: list[Plan]) -> list[ToolCallResponse]:
    """The plans' responses, in call order (every call is answered)."""
    responses = [plan.response for plan in plans if plan.response is not None]
    assert len(responses) == len(plans)
    return responses


def _pending(plans: list[Plan], telemetry: TurnTelemetry | None) -> PendingTurn:
    """The executed turn to complete once (a turn executed untraced is completed untraced)."""
    pending = PendingTurn(
        _responses(plans), ordinals=[plan.ordinal for plan in plans], telemetry=telemetry
    )
    pending._untraced = telemetry is None
    return pending
