"""Running one batch's calls: plan them, pass each through the gate, run it, answer it.

This is ``ToolScheduler.execute``'s work. The calls are planned in the model's order
(unknown tools, invalid calls and repeated ids are answered in place), then
up to ``concurrency`` workers take the rest in that order, each call with its deadline
(``_deadlines``), and every call gets exactly one response. Nothing a tool raises escapes.
The calling task is the first worker; the others start once one of its calls suspends
(``Helpers``), so calls that never suspend start no task.
"""

from __future__ import annotations

import asyncio
import contextvars
import operator
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
import anyio.abc
import anyio.lowlevel
import structlog
from pydantic import ValidationError

try:  # anyio asks sniffio for the running library when it is installed
    from sniffio import current_async_library_cvar
except ImportError:  # else it finds the running asyncio loop itself
    current_async_library_cvar = None  # type: ignore[assignment]

from toolbatch._core import (
    BatchObserver,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolResult,
)
from toolbatch.artifacts import ArtifactStore
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
from toolbatch.scheduler._config import SchedulerConfig
from toolbatch.scheduler._deadlines import Deadlines, Worker, asyncio_loop
from toolbatch.scheduler._gate import (
    Admitted,
    ApprovalCallback,
    CallGate,
    ask_approval,
    refusal,
)
from toolbatch.telemetry import CallTelemetry, TurnTelemetry, call_scope, current_turn

__all__ = ["CallRunner", "Plan"]

log = structlog.get_logger("toolbatch.scheduler")

BACKSTOP_GRACE_S: Final = 10.0
"""Time a producer gets past the ceiling to clean up and answer before it is cut off."""
YIELD_EVERY_CALLS: Final = 16
"""A worker lets the event loop run at least once per this many calls it answers."""


@dataclass(slots=True, eq=False)
class Route:
    """How one tool's calls run, read from its producer (and its frozen declaration) once,
    then kept for the session while the tool's name finds that producer and declaration."""

    producer: Producer
    declaration: ToolDeclaration
    timeout_s: float
    """What the call is told it may take (``ProducerContext.timeout_s``)."""
    allowed_s: float
    """When the runtime stops it: ``timeout_s``, plus a grace to clean up when that is the
    configured ceiling rather than the producer's own, shorter timeout."""
    output_threshold: int | None
    needs_permission: bool
    """Whether an ``approve`` callback is asked before a call runs (no rules, no hooks)."""


@dataclass(slots=True, eq=False)
class Plan:
    """One call's place in the batch and, once known, its response."""

    ordinal: int
    call: ToolCall
    route: Route | None = None
    response: ToolCallResponse | None = None
    context: ProducerContext | None = None
    deadline: float | None = None
    timeout_s: float = 0.0
    timed_out: bool = False
    started: bool = False
    span: CallTelemetry | None = None


@dataclass(slots=True, eq=False)
class Batch:
    """What every worker of one batch shares."""

    aborted: anyio.Event | None
    """Set when the caller aborts (``None``: the caller cannot abort this batch)."""
    deadlines: Deadlines
    reporter: Reporter
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


class Reporter:
    """Reports each call of a batch to the observer exactly once: started, then finished."""

    __slots__ = ("_finished", "_output", "_progress", "_started", "silent", "telemetry")

    def __init__(self, observer: BatchObserver | None, telemetry: TurnTelemetry | None) -> None:
        self._started = getattr(observer, "call_started", None)
        self._progress = getattr(observer, "call_progress", None)
        self._output = getattr(observer, "call_output", None)
        self._finished = getattr(observer, "call_finished", None)
        self.telemetry = telemetry  # None unless spans or metrics are recorded
        self.silent = self.telemetry is None and (
            self._started is self._progress is self._output is self._finished is None
        )
        """Nothing listens (no observer methods, no telemetry): a call is reported nowhere,
        so the hot path skips the reporter altogether."""

    def started(self, plan: Plan) -> None:
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

    def finished(self, plan: Plan) -> None:
        self.started(plan)
        if self.telemetry is not None:
            self.telemetry.call_finished(plan.span, plan.call, plan.response)
        if self._finished is not None:
            _safe_notify(self._finished, plan.call, plan.response)


_SILENT: Final = Reporter(None, None)
"""The reporter of every batch nobody listens to (no observer, no telemetry)."""


class CallRunner:
    """Runs the batches of one open session: what ``ToolScheduler.execute`` does."""

    def __init__(
        self,
        config: SchedulerConfig,
        gate: CallGate,
        *,
        store: ArtifactStore | None,
        policy: ProcessPolicy | None,
        lookup: Callable[[str], Producer | None],
        available: Callable[[], dict[str, Producer]],
        new_event: Callable[[], anyio.Event],
        new_scope: Callable[[], anyio.CancelScope],
    ) -> None:
        self.config = config
        self._gate = gate
        # The gate is frozen for the session: what every batch asks of it, asked once.
        self._gated = gate.checks_before
        self._post_hooks = gate.has_post
        self._store = store
        self._policy = policy
        self._lookup = lookup
        self._available = available
        # The running backend's own classes, found once when the session opened:
        # ``anyio.Event()`` and ``anyio.CancelScope()`` look the backend up on every call.
        self._new_event = new_event
        self._new_scope = new_scope
        self._deadlines: Deadlines | None = None
        self._routes: dict[str, Route] = {}

    def _session_deadlines(self) -> Deadlines:
        """The deadlines of this session's running calls, on the running event loop."""
        loop = asyncio_loop()
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            if deadlines is not None:
                deadlines.close()
            deadlines = self._deadlines = Deadlines(loop)
        return deadlines

    def close(self) -> None:
        """The session has ended: no deadline timer is left behind."""
        if self._deadlines is not None:
            self._deadlines.close()
            self._deadlines = None

    async def run(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
    ) -> list[Plan]:
        """Plan and run the calls; every plan holds its response, in the model's order."""
        plans = self._plan(calls)
        telemetry = current_turn()
        # Nothing listens (no observer, no telemetry): the one silent reporter serves.
        reporter = (
            _SILENT if observer is None and telemetry is None else Reporter(observer, telemetry)
        )
        for plan in plans:
            if plan.response is not None:
                reporter.finished(plan)
        await self._execute(plans, abort, reporter, approve)
        return plans

    def _plan(self, calls: Sequence[ToolCall | Mapping[str, Any]]) -> list[Plan]:
        if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
            calls = [calls]  # one malformed "batch": answer it
        plans: list[Plan] = []
        seen: set[str] = set()
        routes: dict[str, Route | None] = {}
        in_order = True
        last = -1
        for index, raw in enumerate(calls):
            if type(raw) is ToolCall:
                call, problem = raw, None
            else:
                call, problem = _coerce_call(raw, index)
            ordinal = call.ordinal
            if ordinal is None:
                ordinal = index
            plan = Plan(ordinal, call)
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
            if ordinal < last:
                in_order = False
            last = ordinal
            plans.append(plan)
        if not in_order:
            plans.sort(key=lambda plan: plan.ordinal)
        return plans

    def _route(self, name: str) -> Route | None:
        """How calls of tool ``name`` run in this batch (``None``: no such tool)."""
        producer = self._lookup(name)
        if producer is None:
            return None
        declaration = producer.declaration
        known = self._routes.get(name)
        if known is not None and known.producer is producer and known.declaration is declaration:
            return known  # the frozen declaration and config say the same as last time
        # The deadline is the configured ceiling plus a grace to clean up, or the
        # producer's own timeout (a @tool's) when that is shorter.
        ceiling = self.config.call_timeout
        own = declaration.timeout_s
        if own is not None and own < ceiling:
            timeout_s = allowed_s = float(own)
        else:
            timeout_s, allowed_s = ceiling, ceiling + BACKSTOP_GRACE_S
        route = self._routes[name] = Route(
            producer,
            declaration,
            timeout_s=timeout_s,
            allowed_s=allowed_s,
            # Generic persistence is opt-in per producer: @tool functions declare a
            # threshold; producers that bound their own output (shell, MCP) declare none.
            output_threshold=declaration.output_threshold,
            needs_permission=declaration.needs_permission and not declaration.trusted,
        )
        return route

    async def _execute(
        self,
        plans: list[Plan],
        abort: anyio.Event | None,
        reporter: Reporter,
        approve: ApprovalCallback | None,
    ) -> None:
        runnable = [plan for plan in plans if plan.response is None]
        if not runnable:
            return
        aborted = None if abort is None else self._new_event()
        batch = Batch(
            aborted,
            self._session_deadlines(),
            reporter,
            approve,
            new_event=self._new_event,
            new_scope=self._new_scope,
            abortable=abort is not None,
            gated=self._gated,
            post_hooks=self._post_hooks,
        )
        # ``concurrency`` workers take the calls in the model's order: the limit without a
        # semaphore, and a task per worker rather than per call (1,000 calls, 10 tasks).
        # A call's deadline cancels its worker's scope (``Worker``, ``Deadlines``); an
        # abort cancels the workers' task group. The calling task is the first worker
        # (a one-call batch without an abort to watch starts no task at all), and the
        # others start only once one of its calls suspends (``Helpers``): calls that
        # never suspend are answered one after the other anyway, with no task started.
        queue = iter(runnable)
        workers = min(self.config.concurrency, len(runnable))
        if abort is None and workers == 1:
            await self._work(queue, batch)
        elif abort is None:
            async with anyio.create_task_group() as tg:
                await self._work(queue, batch, self._helpers(tg, queue, batch, workers - 1))
        else:
            assert aborted is not None
            if abort.is_set():
                aborted.set()  # aborted already: the first worker runs no call
            async with anyio.create_task_group() as outer:
                async with anyio.create_task_group() as tg:
                    outer.start_soon(_watch_abort, abort, aborted, tg.cancel_scope)
                    helpers = self._helpers(tg, queue, batch, workers - 1)
                    await self._work(queue, batch, helpers)
                outer.cancel_scope.cancel()
        for plan in runnable:
            if plan.response is None:
                self._answer_stopped(plan, aborted=aborted is not None and aborted.is_set())
                reporter.finished(plan)

    def _helpers(
        self, tg: anyio.abc.TaskGroup, queue: Iterator[Plan], batch: Batch, count: int
    ) -> Helpers | None:
        """The first worker's helpers, started when one of its calls suspends (asyncio),
        or at once (another backend: ``None``)."""
        loop = batch.deadlines.loop
        if loop is None or count < 1:
            for _ in range(count):
                tg.start_soon(self._work, queue, batch)
            return None
        return Helpers(loop, tg, queue, count, lambda: self._work(queue, batch))

    async def _work(
        self,
        queue: Iterator[Plan],
        batch: Batch,
        helpers: Helpers | None = None,
    ) -> None:
        aborted, deadlines, reporter = batch.aborted, batch.deadlines, batch.reporter
        abortable, telemetry, silent = batch.abortable, reporter.telemetry, reporter.silent
        answer, checkpoint = self._answer, anyio.lowlevel.checkpoint
        # With the session's timer (asyncio), an answered call's deadline ends by clearing
        # its worker's plan: no call into ``Deadlines`` per call.
        timer = deadlines.timer
        worker = deadlines.worker()
        answered = 0
        try:
            while True:
                with batch.new_scope() as scope:
                    worker.scope = scope
                    worker.expired = False
                    for plan in queue:
                        if abortable and aborted is not None and aborted.is_set():
                            return  # the rest are answered as cancelled once the batch ends
                        worker.plan = plan
                        if helpers is not None and not helpers.armed:
                            helpers.arm(worker)
                        span = None if telemetry is None else telemetry.start_call(plan.call)
                        if span is None:
                            plan.response = await answer(plan, worker, batch)
                        else:
                            plan.span = span
                            with call_scope(span):
                                plan.response = await answer(plan, worker, batch)
                        if timer:
                            worker.plan = None
                        else:
                            deadlines.stop(worker)
                        if not silent:
                            reporter.finished(plan)
                        # An answered call needs its context no more: a batch of 100,000
                        # calls should not hold 100,000 of them until it ends.
                        plan.context = None
                        if worker.expired if timer else scope.cancel_called:
                            break  # a deadline came as the call answered: a new scope
                        answered += 1
                        if answered % YIELD_EVERY_CALLS == 0:
                            # Calls that never suspend (a trivial async tool) must not starve
                            # the rest of the loop: the abort watcher, an observer's writer.
                            # Between calls, not after taking one: the other workers must
                            # not start the calls behind it first.
                            await checkpoint()
                    else:
                        return
                stopped = worker.plan
                if stopped is not None:
                    # The scope caught its cancellation: the call's deadline passed (an abort
                    # cancels the task group, which this scope does not catch).
                    deadlines.stop(worker)
                    stopped.timed_out = True
        finally:
            # The worker's calls end with it: the session's timer forgets it.
            deadlines.release(worker)
            if helpers is not None:
                helpers.stop()

    def _answer_stopped(self, plan: Plan, *, aborted: bool) -> None:
        """The response of a call whose task was cancelled (abort or deadline)."""
        call = plan.call
        if plan.context is not None:
            plan.context.cancelled.set()  # made now if the producer never asked
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
        plan: Plan,
        worker: Worker,
        batch: Batch,
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

        # The deadline starts when the producer does.
        deadlines = batch.deadlines
        timeout_s = plan.timeout_s = route.timeout_s
        started = deadlines.now()
        plan.deadline = deadline = started + route.allowed_s
        if deadline < deadlines.when:
            deadlines.start(worker, deadline)  # the call is cancelled there
        if reporter.silent:
            # Nobody listens: the context keeps its default callbacks, which producers can
            # tell from ones that listen (the MCP producer then asks for no progress, the
            # shell decodes no output for display).
            context = ProducerContext(
                self._store,
                _CallLog(call.id, call.name),
                None,
                timeout_s,
                deadline=deadline,
                process_policy=self._policy,
                new_event=batch.new_event,
            )
        else:
            context = ProducerContext(
                store=self._store,
                log=_CallLog(call.id, call.name),
                timeout_s=timeout_s,
                progress=self._progress_callback(reporter, call),
                output=reporter.output_callback(call),
                deadline=deadline,
                process_policy=self._policy,
                new_event=batch.new_event,
            )
            reporter.started(plan)
        plan.context = context
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

    @staticmethod
    def _progress_callback(reporter: Reporter, call: ToolCall) -> ProgressCallback:
        """What the producer reports progress to (nothing listens: the default callback)."""
        if not reporter.listens_to_progress:
            return UNWATCHED_PROGRESS

        def report(message: str) -> None:
            reporter.progress(call, message)

        return report

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


class Helpers:
    """The workers that help the first one, started only once one of its calls suspends.

    When the first worker starts a call, it asks the event loop to look at it once the loop
    runs next (``arm``). The loop runs when the worker's task yields: at a call that
    suspends (then, with calls still queued, every helper the limit allows starts, at once:
    a long call delays the next ones by one loop iteration at most), or at the worker's
    regular yield between calls (then nothing has suspended: no helper starts, and the next
    call arms the look again). A batch of calls that never suspend starts no task.
    """

    __slots__ = ("_context", "_count", "_loop", "_queue", "_start", "_tg", "_worker", "armed")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        tg: anyio.abc.TaskGroup,
        queue: Iterator[Plan],
        count: int,
        work: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        self._loop = loop
        self._tg = tg
        self._queue = queue
        self._count = count
        self._start = work
        # The helpers run in the context the first worker started in (the loop's callback
        # would otherwise lend them the context of the call that armed it), which names the
        # running library: a loop callback runs in no task, where anyio cannot tell it.
        self._context = contextvars.copy_context()
        if current_async_library_cvar is not None:
            self._context.run(current_async_library_cvar.set, "asyncio")
        self._worker: Worker | None = None
        self.armed = False
        """A look is due (or no helper will start any more): the worker need not arm one."""

    def arm(self, worker: Worker) -> None:
        """``worker`` has just taken a call: look at it once the event loop runs next."""
        self.armed = True
        self._worker = worker
        self._loop.call_soon(self._look, context=self._context)

    def stop(self) -> None:
        """The first worker has stopped: no helper starts any more."""
        self.armed = True
        self._worker = None

    def _look(self) -> None:
        worker = self._worker
        if worker is None:
            return  # the helpers have started, or the first worker has stopped
        if worker.plan is None:
            self.armed = False  # the worker yielded between calls: arm again at the next
            return
        # The worker's call has suspended: start the helpers the queued calls need (none
        # once the batch is aborted: they would be cancelled before they start).
        self._worker = None
        if self._tg.cancel_scope.cancel_called:
            return
        waiting = operator.length_hint(self._queue)
        for _ in range(min(self._count, waiting)):
            self._tg.start_soon(self._start)


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
            stand_in = ToolCall(
                id=raw_id if isinstance(raw_id, str) and raw_id else f"invalid-call-{index}",
                name=raw_name if isinstance(raw_name, str) and raw_name else "invalid_call",
                ordinal=index,
            )
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'call'}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            return stand_in, f"malformed tool call at position {index}: {problems}"
    stand_in = ToolCall(id=f"invalid-call-{index}", name="invalid_call", ordinal=index)
    return stand_in, (
        f"malformed tool call at position {index}: expected an object with id, name and "
        f"args, got {type(raw).__name__}"
    )
