"""One batch's round trip from the driver to its host, and its events on the way.

A batch is one host call (``execute`` or ``run``). While it runs, the driver fetches its
events (started, progress, finished, approval questions) with ``events`` calls, hands each
to the driver's observer once, answers the questions with the driver's approval callback,
and forwards an abort; a cancelled batch is aborted on the host before the cancellation
goes on. Whether the host is lost, and what the handle does then, is the handle's
(``_session``): this module only reports the error Ray raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

import anyio
import structlog
from ray.exceptions import RayActorError

from toolbatch._core import BatchObserver, ToolCall, ToolCallResponse
from toolbatch.ray._codec import (
    Wire,
    decode_declarations,
    decode_response,
    encode_call,
    stand_in_call,
)
from toolbatch.scheduler import ApprovalCallback, ask_approval

__all__ = [
    "ABORT_TIMEOUT_S",
    "BatchMethod",
    "Delivery",
    "RemoteBatch",
    "batch_entries",
    "call_ordinals",
    "wire_calls",
]

log = structlog.get_logger("toolbatch.ray")

ABORT_TIMEOUT_S: Final = 10.0
"""How long a cancelled batch waits for its host to take the abort."""

BatchMethod = Literal["run", "execute"]


def batch_entries(calls: Any) -> list[Any]:
    """The entries of a batch as given (one malformed "batch" is one entry: the
    scheduler answers it as such)."""
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Sequence):
        return [calls]
    return list(calls)


def call_ordinals(entries: Sequence[Any]) -> list[int]:
    """Each entry's place in the model's order, as the host's scheduler numbers it."""
    return [
        entry.ordinal if isinstance(entry, ToolCall) and entry.ordinal is not None else index
        for index, entry in enumerate(entries)
    ]


def wire_calls(entries: Sequence[Any]) -> list[Wire]:
    """The entries as the host reads them: a call encoded, anything else as plain data."""
    return [
        {"call": encode_call(entry)} if isinstance(entry, ToolCall) else {"raw": _plain(entry)}
        for entry in entries
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


class Delivery:
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

    @property
    def observed(self) -> bool:
        """Whether the observer listens to any event."""
        return self._started is not None or self._progress is not None or self._finished is not None

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


class RemoteBatch:
    """One host call running a batch, with its event feed, approvals and abort.

    Args:
        actor: the session's host actor.
        key: the session's key on its host.
        token: the batch's token (its name on the host).
        delivery: where the batch's events go.
        approve: the driver's approval callback, if any.
    """

    def __init__(
        self,
        actor: Any,
        key: str,
        token: int,
        delivery: Delivery,
        approve: ApprovalCallback | None,
    ) -> None:
        self._actor = actor
        self._key = key
        self._token = token
        self._delivery = delivery
        self._approve = approve

    @property
    def observed(self) -> bool:
        """Whether the host must keep the batch's events for the driver."""
        return self._delivery.observed or self._approve is not None

    async def send(
        self, method: BatchMethod, request: Wire, *, abort: anyio.Event | None
    ) -> tuple[Wire | None, BaseException | None]:
        """The host's answer, and the error that says the host was lost, if one did.

        A cancellation aborts the batch on the host (bounded by ``ABORT_TIMEOUT_S``) and
        goes on.
        """
        ref = getattr(self._actor, method).remote(self._key, request)
        result: Wire | None = None
        lost: BaseException | None = None
        try:
            async with anyio.create_task_group() as watchers:
                if abort is not None:
                    watchers.start_soon(self._forward_abort, abort)
                async with anyio.create_task_group() as feed:
                    if request["observe"]:
                        feed.start_soon(self._poll)
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
                await self._actor.abort.remote(self._key, self._token)
            raise
        return result, lost or self._delivery.lost

    async def _forward_abort(self, abort: anyio.Event) -> None:
        await abort.wait()
        with contextlib.suppress(RayActorError):  # a lost batch is answered as lost
            await self._actor.abort.remote(self._key, self._token)

    async def _poll(self) -> None:
        """Fetch the batch's events until its last, answering approvals as they come."""
        async with anyio.create_task_group() as asks:
            try:
                while True:
                    answer: Wire = await self._actor.events.remote(self._key, self._token)
                    for event in answer["events"]:
                        if event[0] == "ask":
                            asks.start_soon(self._answer, event)
                        else:
                            self._delivery.take(event)
                    if answer["done"]:
                        break
            except RayActorError as exc:
                self._delivery.lost = exc  # the batch's own call fails too, and reports it

    async def _answer(self, event: list[Any]) -> None:
        _, ask_id, ref, declaration = event
        answer: bool | str = False
        if self._approve is not None:
            call = self._delivery.call(ref)
            declared = decode_declarations([declaration])[0]
            answer = await ask_approval(self._approve, call, declared)
        with contextlib.suppress(RayActorError):
            await self._actor.answer.remote(self._key, self._token, ask_id, answer)
