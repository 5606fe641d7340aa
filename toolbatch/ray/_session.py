"""The driver's side of a remote session: ``SessionHandle``, with ``ToolScheduler``'s surface.

``execute``, ``complete_turn``, ``run_batch``, ``declarations``, ``producer`` and ``config``
behave as a local scheduler's do, so ``AgentLoop`` and every runtime run unchanged against
a session whose tools, MCP servers, workspace and artifacts live on another node. The
finalizer runs there; the recorder stays here and records exactly the turn returned.

A batch whose host dies (the actor or its node) is answered here with one
``session_lost`` error response per call, in call order: nothing is retried (a tool may
have run: at most once), nothing is lost or duplicated.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import anyio
import anyio.to_thread
import structlog
from ray.exceptions import ActorUnavailableError, RayActorError

from toolbatch._core import BatchObserver, ToolCall, ToolCallResponse, ToolDeclaration, Turn
from toolbatch.errors import ConfigError, RecorderError, SessionHostError
from toolbatch.finalize import Budget, check_budget, finalize_tool_responses
from toolbatch.ray._codec import (
    Wire,
    decode_declarations,
    decode_response,
    decode_turn,
    encode_call,
    encode_response,
    stand_in_call,
)
from toolbatch.ray._host import NOT_OPEN, SessionSpec
from toolbatch.recorder import Recorder
from toolbatch.scheduler import (
    USE_CONFIG,
    ApprovalCallback,
    PendingTurn,
    SchedulerConfig,
    UseConfig,
    ask_approval,
)

__all__ = [
    "CLOSE_TIMEOUT_S",
    "DEFAULT_OPEN_TIMEOUT_S",
    "LOST_ERROR_TYPE",
    "MAX_HELD_BATCHES",
    "RemoteTool",
    "SessionHandle",
    "SessionState",
]

log = structlog.get_logger("toolbatch.ray")

SessionState: TypeAlias = Literal["open", "lost", "dead", "closed"]
"""``open``; ``lost``: its host died and is restarted (a new session opens on next use);
``dead``: its host died and is not restarted; ``closed``."""

LOST_ERROR_TYPE: Final = "session_lost"
"""The ``error_type`` of responses to calls whose session host was lost."""
MAX_HELD_BATCHES: Final = 8
"""Executed batches a handle holds for completion; older ones are dropped on both sides."""
DEFAULT_OPEN_TIMEOUT_S: Final = 120.0
CLOSE_TIMEOUT_S: Final = 30.0
"""How long a closing session may take to stop its MCP servers and processes."""
ABORT_TIMEOUT_S: Final = 10.0
RESTART_POLL_S: Final = 0.1
"""How often a handle asks a restarting host again whether it is back."""


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool of a remote session as the driver sees it: its declaration (it runs only
    through the session's ``execute``)."""

    declaration: ToolDeclaration


def _entries(calls: Any) -> list[Any]:
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        return [calls]  # one malformed "batch": answered as the scheduler answers it
    return list(calls)


def _ordinals(entries: Sequence[Any]) -> list[int]:
    """Each entry's place in the model's order, as the host's scheduler numbers it."""
    return [
        entry.ordinal if isinstance(entry, ToolCall) and entry.ordinal is not None else index
        for index, entry in enumerate(entries)
    ]


def _plain(raw: object) -> object:
    """A batch entry that is not a ``ToolCall``, as data the host can read."""
    if isinstance(raw, Mapping):
        return {str(key): value for key, value in raw.items()}
    if raw is None or isinstance(raw, str | int | float | bool | list):
        return raw
    return f"<{type(raw).__name__}>"


def _notify(method: Callable[..., None] | None, *args: object) -> None:
    if method is None:
        return
    try:
        method(*args)
    except Exception as exc:  # an observer never breaks the batch
        log.warning("ray.observer_failed", error=f"{type(exc).__name__}: {exc}")


class _Delivery:
    """A batch's events as the driver's observer sees them, each call reported once."""

    def __init__(self, entries: list[Any], observer: BatchObserver | None) -> None:
        self.entries = entries
        self.finished: list[ToolCallResponse] = []
        self.started_ids: set[str] = set()
        self.finished_ids: set[str] = set()
        self.lost: BaseException | None = None
        self._started = getattr(observer, "call_started", None)
        self._progress = getattr(observer, "call_progress", None)
        self._finished = getattr(observer, "call_finished", None)

    def call(self, ref: Any) -> ToolCall:
        if isinstance(ref, int):
            return stand_in_call(self.entries[ref], ref)
        return ToolCall.model_validate(ref["call"])

    def take(self, event: list[Any]) -> None:
        kind = event[0]
        if kind == "finished":
            response = decode_response(event[2])
            self.finished.append(response)
            if event[1] is not None:
                call = self.call(event[1])
                self.finished_ids.add(call.id)
                _notify(self._finished, call, response)
        elif kind == "started":
            call = self.call(event[1])
            self.started_ids.add(call.id)
            _notify(self._started, call)
        elif kind == "progress":
            _notify(self._progress, self.call(event[1]), event[2])

    def report_lost(self, responses: Sequence[ToolCallResponse], calls: Sequence[ToolCall]) -> None:
        """Report the calls not finished yet with their lost responses."""
        for call, response in zip(calls, responses, strict=True):
            if call.id in self.finished_ids:
                continue
            if call.id not in self.started_ids:
                _notify(self._started, call)
            _notify(self._finished, call, response)


class SessionHandle:
    """A session hosted by a Ray actor, driven from here like a ``ToolScheduler``.

    Made by ``toolbatch.ray.open_session`` or ``toolbatch.ray.SessionPool``, never directly.

    Attributes:
        session_id: the session's id.
        config: the session's configuration as given (its recorder is this side's).
        workspace: the session's workspace directory on its host.
    """

    def __init__(
        self,
        actor: Any,
        spec: SessionSpec,
        config: SchedulerConfig,
        *,
        restartable: bool,
    ) -> None:
        self._actor = actor
        self._spec = spec
        self._key = spec.session_id
        self.session_id = spec.session_id
        self.config = config
        self.workspace: str | None = None
        self._restartable = restartable
        self._state: SessionState = "closed"
        self._lost_reason: str | None = None
        self._serve: Any = None
        self._tokens = itertools.count(1)
        self._held: dict[int, None] = {}
        """Tokens of the batches the host holds for a completion, oldest first."""
        self._declarations: list[ToolDeclaration] = []
        self.restarts = 0

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """``open``, ``lost`` (restarted on next use), ``dead`` or ``closed``."""
        return self._state

    @property
    def dead(self) -> bool:
        """Whether the session's host was lost (its workspace and running state with it)."""
        return self._state in ("lost", "dead")

    @property
    def lost_reason(self) -> str | None:
        """Why the host was lost, when it was."""
        return self._lost_reason

    @property
    def actor(self) -> Any:
        """The Ray actor hosting this session."""
        return self._actor

    async def host_pid(self) -> int:
        """The host process's id (on its node)."""
        pid: int = await self._actor.pid.remote()
        return pid

    def _lose(self, exc: BaseException | str) -> None:
        reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}".split("\n")[0]
        self._lost_reason = reason
        if self._state != "closed":
            self._state = "lost" if self._restartable else "dead"
        log.warning("ray.session_lost", session_id=self.session_id, reason=reason[:300])

    # -- lifecycle --------------------------------------------------------------------------

    async def _open(self, *, timeout_s: float = DEFAULT_OPEN_TIMEOUT_S) -> None:
        self._serve = self._actor.serve.remote(self._key, self._spec)
        try:
            with anyio.fail_after(timeout_s):
                ready: Wire = await self._actor.ready.remote(self._key)
        except TimeoutError:
            raise SessionHostError(
                f"session {self.session_id!r} did not open within {timeout_s:g} s; its host "
                f"may be waiting for resources (see `ray status`) or its MCP servers for "
                f"their start",
                session_id=self.session_id,
            ) from None
        if "error" in ready:
            await self._drain_serve()
            raise SessionHostError(
                f"session {self.session_id!r} could not be opened on its host: {ready['error']}",
                session_id=self.session_id,
            )
        self._declarations = decode_declarations(ready["declarations"] or [])
        self.workspace = ready["workspace"]
        self._state = "open"

    async def _drain_serve(self) -> None:
        serve, self._serve = self._serve, None
        if serve is None:
            return
        try:
            with anyio.move_on_after(CLOSE_TIMEOUT_S):
                await serve
        except Exception as exc:  # the host's open failed (already reported) or it died
            log.debug("ray.serve_ended", session_id=self.session_id, error=repr(exc)[:200])

    async def _ensure_open(self) -> bool:
        """Whether the session can run a batch now (reopened after a restart if need be)."""
        if self._state == "closed":
            raise SessionHostError(
                f"session {self.session_id!r} is closed", session_id=self.session_id
            )
        if self._state == "lost":
            try:
                await self._reopen()
            except (RayActorError, SessionHostError, TimeoutError) as exc:
                self._restartable = False
                self._lose(exc)
                return False
            self.restarts += 1
            log.info("ray.session_reopened", session_id=self.session_id, restarts=self.restarts)
        return self._state == "open"

    async def _reopen(self) -> None:
        """Open the session again on its restarted host (Ray says "unavailable" until the
        host is back; it raises ``ActorDiedError`` once it will not come back)."""
        with anyio.fail_after(DEFAULT_OPEN_TIMEOUT_S):
            while True:
                await self._drain_serve()
                try:
                    await self._open()
                    return
                except ActorUnavailableError:
                    await anyio.sleep(RESTART_POLL_S)

    async def aclose(self) -> None:
        """Close the session: its batches are aborted, its MCP servers and processes
        stopped, its temporary workspace removed (on the host)."""
        if self._state == "closed" and self._serve is None:
            return
        with anyio.CancelScope(shield=True):
            # "closed" with a serve call out: an open that was cancelled; it may be open
            # on the host by now. A lost host has nothing open to close.
            if self._state in ("open", "closed"):
                try:
                    with anyio.move_on_after(CLOSE_TIMEOUT_S):
                        await self._actor.close.remote(self._key)
                except RayActorError:
                    pass
            await self._drain_serve()
            self._state = "closed"
            self._held.clear()

    # -- what the model is offered ------------------------------------------------------------

    def declarations(self) -> list[ToolDeclaration]:
        """Every tool the session offers (as of its last answer: MCP lists follow)."""
        return list(self._declarations)

    async def wait_for_tools(self) -> list[ToolDeclaration]:
        """``declarations()``: the host lists every MCP server's tools before it opens."""
        return self.declarations()

    def producer(self, name: str) -> RemoteTool | None:
        """The tool that answers ``name`` in this session (its declaration)."""
        for declaration in self._declarations:
            if declaration.name == name:
                return RemoteTool(declaration)
        return None

    def _declared(self, result: Wire) -> None:
        declarations = result.get("declarations")
        if declarations is not None:
            self._declarations = decode_declarations(declarations)

    # -- one turn ---------------------------------------------------------------------------

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
        """``ToolScheduler.run_batch``, in one round trip: the calls run and their turn is
        completed on the host; only the completed turn comes back, and is recorded here."""
        limit = self._budget(budget)
        entries = _entries(calls)
        result = await self._remote_batch(
            "run", entries, abort=abort, observer=observer, approve=approve, budget=limit
        )
        if isinstance(result, list):
            turn = await self._lost_turn(result, limit, [False] * len(result))
        else:
            self._declared(result)
            turn = decode_turn(result["turn"])
        return await self._record(turn, USE_CONFIG)

    async def execute(
        self,
        calls: Sequence[ToolCall | Mapping[str, Any]],
        /,
        *,
        abort: anyio.Event | None = None,
        observer: BatchObserver | None = None,
        approve: ApprovalCallback | None = None,
    ) -> PendingTurn:
        """``ToolScheduler.execute`` on the host: one response per call, in call order.

        The responses stay on the host too, until ``complete_turn`` sends a reference to
        them back (``PendingTurn.remote``). When the host is lost, every call is answered
        ``session_lost``.
        """
        entries = _entries(calls)
        result = await self._remote_batch(
            "execute", entries, abort=abort, observer=observer, approve=approve, budget={}
        )
        if isinstance(result, list):
            return PendingTurn(result, ordinals=_ordinals(entries))
        token, responses = self._hold(result)
        return PendingTurn(responses, ordinals=_ordinals(entries), remote=token)

    async def complete_turn(
        self,
        pending: PendingTurn | Sequence[ToolCallResponse],
        /,
        *,
        budget: Budget | float | UseConfig = USE_CONFIG,
        recorder: Recorder | UseConfig | None = USE_CONFIG,
    ) -> Turn:
        """``ToolScheduler.complete_turn`` on the host, recorded here.

        Responses ``execute`` returned are sent back as a reference (the host finalizes
        its own objects); responses added here (duplicates, skipped calls) are sent whole,
        with their place in the model's order. When the host is lost, the host's responses
        are answered ``session_lost`` (their output could not be bounded) and the rest
        kept, bounded here.
        """
        limit = self._budget(budget)
        if not isinstance(pending, PendingTurn):
            pending = PendingTurn.answered(pending)
        pending.claim()
        token: int | None = pending.remote if pending.remote in self._held else None
        items: list[Wire] = []
        from_host: list[bool] = []
        for response, position, ordinal in pending.entries():
            hosted = token is not None and position is not None
            from_host.append(position is not None)
            if not hosted:
                items.append({"response": encode_response(response), "ordinal": ordinal})
        turn: Turn | None = None
        if self._state == "open":
            keep = [held for held in self._held if held != token]
            request = {"token": token, "items": items, "budget": limit, "keep": keep}
            try:
                result = await self._actor.complete.remote(self._key, request)
            except RayActorError as exc:
                self._lose(exc)
            else:
                if "lost" in result:
                    self._lose(f"the host no longer holds the batch ({result['lost']})")
                else:
                    self._declared(result)
                    turn = decode_turn(result["turn"])
        if token is not None:
            self._held.pop(token, None)
        if turn is None:
            turn = await self._lost_turn(pending.responses, limit, from_host)
        return await self._record(turn, recorder)

    # -- the wire ---------------------------------------------------------------------------

    def _budget(self, budget: Budget | float | UseConfig) -> Wire:
        if isinstance(budget, UseConfig):
            return {}
        return {"budget": check_budget(budget, name="budget")}

    def _hold(self, result: Wire) -> tuple[int, list[ToolCallResponse]]:
        token: int = result["token"]
        responses: list[ToolCallResponse] = result["responses"]
        self._held[token] = None
        while len(self._held) > MAX_HELD_BATCHES:
            self._held.pop(next(iter(self._held)))
        return token, list(responses)

    async def _remote_batch(
        self,
        method: Literal["run", "execute"],
        entries: list[Any],
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
        budget: Wire,
    ) -> Wire | list[ToolCallResponse]:
        """The host's answer, or (a list) the batch answered here because the host is gone."""
        delivery = _Delivery(entries, observer)
        for _ in range(2):  # once more after a host restart found the session gone
            if not await self._ensure_open():
                return self._lost_responses(entries, delivery, ran=False)
            outcome = await self._call_batch(
                method, entries, delivery, abort=abort, approve=approve, budget=budget
            )
            if outcome is not None:
                return outcome
            if self._state != "lost":
                break
        return self._lost_responses(entries, delivery, ran=False)

    async def _call_batch(
        self,
        method: Literal["run", "execute"],
        entries: list[Any],
        delivery: _Delivery,
        *,
        abort: anyio.Event | None,
        approve: ApprovalCallback | None,
        budget: Wire,
    ) -> Wire | list[ToolCallResponse] | None:
        """One attempt: the answer, the lost responses, or ``None`` when the host had no
        such session (restarted before the batch reached it: nothing ran)."""
        token = next(self._tokens)
        wire_calls = [
            {"call": encode_call(c)} if isinstance(c, ToolCall) else {"raw": _plain(c)}
            for c in entries
        ]
        observe = delivery._started is not None or delivery._progress is not None
        observe = observe or delivery._finished is not None or approve is not None
        request: Wire = {
            "token": token,
            "calls": wire_calls,
            "observe": observe,
            "approval": approve is not None,
            "keep": list(self._held),
        }
        if method == "run":
            request["budget"] = budget
        ref = getattr(self._actor, method).remote(self._key, request)
        result: Wire | None = None
        lost: BaseException | None = None
        try:
            async with anyio.create_task_group() as watchers:
                if abort is not None:
                    watchers.start_soon(self._forward_abort, abort, token)
                async with anyio.create_task_group() as feed:
                    if observe:
                        feed.start_soon(self._poll, token, delivery, approve)
                    try:
                        result = await ref
                    except RayActorError as exc:
                        lost = exc
                        feed.cancel_scope.cancel()
                    else:
                        if "lost" in result:
                            feed.cancel_scope.cancel()  # the batch never started there
                watchers.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(ABORT_TIMEOUT_S),
                contextlib.suppress(RayActorError),
            ):
                await self._actor.abort.remote(self._key, token)
            raise
        lost = lost or delivery.lost
        if lost is not None or result is None:
            self._lose(lost if lost is not None else "no answer")
            return self._lost_responses(entries, delivery, ran=True)
        if result.get("lost") == NOT_OPEN:
            self._lose("the host was restarted; the session opens again")
            return None  # (its poll, if any, was ended with the feed below)
        if method == "run":
            return result
        for event in result["events"]:
            delivery.take(event)
        responses = [
            delivery.finished[item] if isinstance(item, int) else decode_response(item["response"])
            for item in result["order"]
        ]
        self._declared(result)
        return {"token": token, "responses": responses}

    async def _forward_abort(self, abort: anyio.Event, token: int) -> None:
        await abort.wait()
        with contextlib.suppress(RayActorError):  # a lost batch is answered as lost
            await self._actor.abort.remote(self._key, token)

    async def _poll(
        self,
        token: int,
        delivery: _Delivery,
        approve: ApprovalCallback | None,
    ) -> None:
        """Fetch the batch's events until its last, answering approvals as they come."""
        async with anyio.create_task_group() as asks:
            try:
                while True:
                    answer: Wire = await self._actor.events.remote(self._key, token)
                    for event in answer["events"]:
                        if event[0] == "ask":
                            asks.start_soon(self._answer, token, delivery, approve, event)
                        else:
                            delivery.take(event)
                    if answer["done"]:
                        break
            except RayActorError as exc:
                delivery.lost = exc  # the batch's own call fails too, and reports it

    async def _answer(
        self,
        token: int,
        delivery: _Delivery,
        approve: ApprovalCallback | None,
        event: list[Any],
    ) -> None:
        _, ask_id, ref, declaration = event
        answer: bool | str = False
        if approve is not None:
            call = delivery.call(ref)
            answer = await ask_approval(approve, call, decode_declarations([declaration])[0])
        with contextlib.suppress(RayActorError):
            await self._actor.answer.remote(self._key, token, ask_id, answer)

    # -- a lost host ------------------------------------------------------------------------

    def _lost_responses(
        self, entries: list[Any], delivery: _Delivery, *, ran: bool
    ) -> list[ToolCallResponse]:
        calls = [stand_in_call(raw, index) for index, raw in enumerate(entries)]
        if ran:
            message = (
                f"the session host of {self.session_id!r} was lost during this batch "
                f"({self._lost_reason}); the call may or may not have run, and it was not "
                f"run again; its workspace and processes are gone"
            )
        else:
            message = (
                f"the session host of {self.session_id!r} was lost earlier "
                f"({self._lost_reason}); the call was not run"
            )
        ordered = sorted(
            enumerate(calls),
            key=lambda item: item[1].ordinal if item[1].ordinal is not None else item[0],
        )
        sorted_calls = [call for _, call in ordered]
        responses = [
            ToolCallResponse.failed(call, message, error_type=LOST_ERROR_TYPE)
            for call in sorted_calls
        ]
        delivery.report_lost(responses, sorted_calls)
        return responses

    async def _lost_turn(
        self, responses: Sequence[ToolCallResponse], limit: Wire, from_host: Sequence[bool]
    ) -> Turn:
        """The turn of a batch whose host is gone, bounded here (there is nothing to
        persist): the host's responses are answered ``session_lost`` (their output was
        never bounded), the ones made here are kept."""
        answered: list[ToolCallResponse] = []
        for response, hosted in zip(responses, from_host, strict=True):
            if not hosted or response.error_type == LOST_ERROR_TYPE:
                answered.append(response)
                continue
            call = ToolCall(id=response.call_id, name=response.name, args=response.call_args or {})
            message = (
                f"the session host of {self.session_id!r} was lost before this turn was "
                f"completed ({self._lost_reason}); the call ran, but its result could not be "
                f"bounded on its host and is not sent"
            )
            answered.append(ToolCallResponse.failed(call, message, error_type=LOST_ERROR_TYPE))
        budget = limit.get("budget", self.config.budget)
        finalized = await finalize_tool_responses(
            answered, budget=budget, store=None, lifecycle_tools=self.config.lifecycle
        )
        parts = [part for response in finalized for part in response.parts]
        return Turn(responses=finalized, parts=parts, stop_reason=None)

    async def _record(self, turn: Turn, recorder: Recorder | UseConfig | None) -> Turn:
        record = self.config.recorder if isinstance(recorder, UseConfig) else recorder
        if record is not None:
            try:
                await record.record_turn(turn)
            except RecorderError as exc:
                exc.turn = turn
                raise
        return turn


def check_restarts(value: object) -> int:
    """``max_restarts`` as Ray takes it: an int >= -1 (-1: without limit)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ConfigError(
            f"max_restarts must be an int >= -1 (0: never restart, -1: without limit), "
            f"got {value!r}"
        )
    return value


if TYPE_CHECKING:
    from toolbatch.agent import SchedulerLike

    def _a_session_handle_is_scheduler_like(handle: SessionHandle) -> SchedulerLike:
        return handle  # mypy checks the structural match: AgentLoop takes a handle as it is
