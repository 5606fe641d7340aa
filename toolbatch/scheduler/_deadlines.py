"""The deadlines of one batch's running calls, and the workers whose scopes they cancel."""

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
    """The deadlines of one batch's running calls.

    On asyncio one timer of the event loop serves the whole batch: it is set for the
    earliest deadline of a running call and, when it fires, cancels the workers whose
    call is past its deadline, then sets itself for the next one (calls started later
    mostly end later, so a batch of 1,000 calls usually sets it once). Elsewhere each
    running call's deadline is its worker scope's own.
    """

    __slots__ = ("_handle", "_loop", "_workers", "now", "timer", "when")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self._workers: list[Worker] = []
        self._handle: asyncio.TimerHandle | None = None
        self.timer = loop is not None
        """Whether the batch's one timer watches the deadlines (else each worker's scope):
        then an answered call's deadline ends with ``worker.plan = None`` alone."""
        self.when = math.inf
        """A deadline earlier than this needs :meth:`start`, a later one is watched already
        (the timer is set for it; without the timer, every deadline needs it)."""
        self.now = loop.time if loop is not None else anyio.current_time
        """The time on the clock deadlines are set on (``anyio.current_time()``)."""

    def worker(self) -> Worker:
        """A new worker whose running call this batch's timer watches."""
        worker = Worker()
        self._workers.append(worker)
        return worker

    def start(self, worker: Worker, deadline: float) -> None:
        """``worker``'s call is cancelled at ``deadline`` unless it has answered by then."""
        if self._loop is None:
            assert worker.scope is not None
            worker.scope.deadline = deadline
        elif deadline < self.when:
            if self._handle is not None:
                self._handle.cancel()
            self.when = deadline
            self._handle = self._loop.call_at(deadline, self._expire)

    def stop(self, worker: Worker) -> None:
        """``worker``'s call has answered: its deadline no longer applies."""
        worker.plan = None
        if self._loop is None and worker.scope is not None:
            worker.scope.deadline = math.inf

    def _expire(self) -> None:
        assert self._loop is not None
        self._handle = None
        self.when = math.inf
        now = self._loop.time()
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
            self._handle = self._loop.call_at(upcoming, self._expire)

    def close(self) -> None:
        """The batch has ended: no timer is left behind."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self.when = math.inf
