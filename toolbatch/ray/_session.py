"""The driver's side of a remote session: ``SessionHandle``, with ``ToolScheduler``'s surface.

``execute``, ``complete_turn``, ``run_batch``, ``declarations``, ``producer`` and ``config``
behave as a local scheduler's do, so ``AgentLoop`` and every runtime run unchanged against
a session whose tools, MCP servers, workspace and artifacts live on another node. The
finalizer runs there; the recorder stays here and records exactly the turn returned.

A batch whose host dies (the actor or its node) is answered here with one
``session_lost`` error response per call, in call order (``_lost``); nothing is retried.
The handle keeps the session's state (open, lost, dead, closed), reopens it on a restarted
host and holds the tokens of executed batches; one batch's round trip, with its events,
approvals and abort, is ``_batch``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import anyio
import structlog
from ray.exceptions import ActorUnavailableError, RayActorError

from toolbatch._core import BatchObserver, ToolCall, ToolCallResponse, ToolDeclaration, Turn
from toolbatch.errors import ConfigError, RecorderError, SessionHostError
from toolbatch.finalize import Budget, check_budget
from toolbatch.ray._batch import (
    BatchMethod,
    Delivery,
    RemoteBatch,
    batch_entries,
    call_ordinals,
    wire_calls,
)
from toolbatch.ray._codec import (
    Wire,
    decode_declarations,
    decode_response,
    decode_turn,
    encode_response,
)
from toolbatch.ray._host import NOT_OPEN, SessionSpec
from toolbatch.ray._lost import lost_responses, lost_turn
from toolbatch.recorder import Recorder
from toolbatch.scheduler import (
    USE_CONFIG,
    ApprovalCallback,
    PendingTurn,
    SchedulerConfig,
    UseConfig,
)

__all__ = [
    "CLOSE_TIMEOUT_S",
    "DEFAULT_OPEN_TIMEOUT_S",
    "MAX_HELD_BATCHES",
    "RemoteTool",
    "SessionHandle",
    "SessionState",
]

log = structlog.get_logger("toolbatch.ray")

SessionState: TypeAlias = Literal["open", "lost", "dead", "closed"]
"""``open``; ``lost``: its host died and is restarted (a new session opens on next use);
``dead``: its host died and is not restarted; ``closed``."""

MAX_HELD_BATCHES: Final = 8
"""Executed batches a handle holds for completion; older ones are dropped on both sides."""
DEFAULT_OPEN_TIMEOUT_S: Final = 120.0
CLOSE_TIMEOUT_S: Final = 30.0
"""How long a closing session may take to stop its MCP servers and processes."""
RESTART_POLL_S: Final = 0.1
"""How often a handle asks a restarting host again whether it is back."""


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool of a remote session as the driver sees it: its declaration (it runs only
    through the session's ``execute``)."""

    declaration: ToolDeclaration


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
        entries = batch_entries(calls)
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
        entries = batch_entries(calls)
        result = await self._remote_batch(
            "execute", entries, abort=abort, observer=observer, approve=approve, budget={}
        )
        if isinstance(result, list):
            return PendingTurn(result, ordinals=call_ordinals(entries))
        token, responses = self._hold(result)
        return PendingTurn(responses, ordinals=call_ordinals(entries), remote=token)

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
        method: BatchMethod,
        entries: list[Any],
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
        approve: ApprovalCallback | None,
        budget: Wire,
    ) -> Wire | list[ToolCallResponse]:
        """The host's answer, or (a list) the batch answered here because the host is gone."""
        delivery = Delivery(entries, observer)
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
        method: BatchMethod,
        entries: list[Any],
        delivery: Delivery,
        *,
        abort: anyio.Event | None,
        approve: ApprovalCallback | None,
        budget: Wire,
    ) -> Wire | list[ToolCallResponse] | None:
        """One attempt: the answer, the lost responses, or ``None`` when the host had no
        such session (restarted before the batch reached it: nothing ran)."""
        token = next(self._tokens)
        batch = RemoteBatch(self._actor, self._key, token, delivery, approve)
        request: Wire = {
            "token": token,
            "calls": wire_calls(entries),
            "observe": batch.observed,
            "approval": approve is not None,
            "keep": list(self._held),
        }
        if method == "run":
            request["budget"] = budget
        result, lost = await batch.send(method, request, abort=abort)
        if lost is not None or result is None:
            self._lose(lost if lost is not None else "no answer")
            return self._lost_responses(entries, delivery, ran=True)
        if result.get("lost") == NOT_OPEN:
            self._lose("the host was restarted; the session opens again")
            return None  # (its poll, if any, was ended with the feed)
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

    # -- a lost host ------------------------------------------------------------------------

    def _lost_responses(
        self, entries: list[Any], delivery: Delivery, *, ran: bool
    ) -> list[ToolCallResponse]:
        calls, responses = lost_responses(self.session_id, self._lost_reason, entries, ran=ran)
        delivery.report_lost(responses, calls)
        return responses

    async def _lost_turn(
        self, responses: Sequence[ToolCallResponse], limit: Wire, from_host: Sequence[bool]
    ) -> Turn:
        return await lost_turn(
            self.session_id,
            self._lost_reason,
            responses,
            from_host,
            budget=limit.get("budget", self.config.budget),
            lifecycle_tools=self.config.lifecycle,
        )

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
