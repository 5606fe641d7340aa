"""The deadlines of a session's running calls, and the workers whose scopes they cancel."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from toolbatch.scheduler._execution import Plan

__all__ = ["Deadlines", "Worker", "asyncio_loop"]


class Worker:
    """One of a batch's workers: the cancel scope its calls run in, and the call it runs.

    The scope spans the worker's calls, not one call (a cancel scope per call cost more
    than the rest of the scheduler's work on a call): a call's deadline cancels it, the
    worker answers that call as timed out and opens a new scope for the next.
    """

    __slots__ = ("expired", "plan", "scope")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.plan: Plan | None = None
        self.expired = False
        """The batch's timer cancelled the scope (read instead of ``scope.cancel_called``)."""


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio event loop, or ``None`` on another anyio backend."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Deadlines:
    """The deadlines of one session's running calls (every batch's).

    On asyncio one timer of the event loop serves the session: it is set for the earliest
    deadline of a running call and, when it fires, cancels the workers whose call is past
    its deadline, then sets itself for the next one, or for none when no call runs. A
    batch's calls end long before their deadlines as a rule, so the timer of one batch
    usually serves the next ones too: a one-call batch sets no timer and cancels none
    (a timer per batch left a cancelled handle in the loop's heap each time). Elsewhere
    each running call's deadline is its worker scope's own.
    """

    __slots__ = ("_handle", "_workers", "loop", "now", "timer", "when")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        """The event loop whose timer this is (``None``: the scopes' own deadlines)."""
        self._workers: set[Worker] = set()
        self._handle: asyncio.TimerHandle | None = None
        self.timer = loop is not None
        """Whether the session's one timer watches the deadlines (else each worker's scope):
        then an answered call's deadline ends with ``worker.plan = None`` alone."""
        self.when = math.inf
        """A deadline earlier than this needs :meth:`start`, a later one is watched already
        (the timer is set for it, or fires earlier and sets itself again; without the
        timer, every deadline needs it)."""
        self.now = loop.time if loop is not None else anyio.current_time
        """The time on the clock deadlines are set on (``anyio.current_time()``)."""

    def worker(self) -> Worker:
        """A new worker whose running call the timer watches until :meth:`release`."""
        worker = Worker()
        self._workers.add(worker)
        return worker

    def release(self, worker: Worker) -> None:
        """``worker`` has stopped: nothing of it is watched any more."""
        worker.plan = None
        self._workers.discard(worker)

    def start(self, worker: Worker, deadline: float) -> None:
        """``worker``'s call is cancelled at ``deadline`` unless it has answered by then."""
        if self.loop is None:
            assert worker.scope is not None
            worker.scope.deadline = deadline
        elif deadline < self.when:
            if self._handle is not None:
                self._handle.cancel()
            self.when = deadline
            self._handle = self.loop.call_at(deadline, self._expire)

    def stop(self, worker: Worker) -> None:
        """``worker``'s call has answered: its deadline no longer applies."""
        worker.plan = None
        if self.loop is None and worker.scope is not None:
            worker.scope.deadline = math.inf

    def _expire(self) -> None:
        assert self.loop is not None
        self._handle = None
        self.when = math.inf
        now = self.loop.time()
        upcoming = math.inf
        for worker in self._workers:
            plan = worker.plan
            if plan is None or plan.deadline is None:
                continue
            if plan.deadline <= now:
                if worker.scope is not None:
                    worker.expired = True
                    worker.scope.cancel()
            elif plan.deadline < upcoming:
                upcoming = plan.deadline
        if upcoming < math.inf:
            self.when = upcoming
            self._handle = self.loop.call_at(upcoming, self._expire)

    def close(self) -> None:
        """The session has ended: no timer is left behind."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self.when = math.inf
        self._workers.clear()
