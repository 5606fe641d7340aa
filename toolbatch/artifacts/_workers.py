"""The store's worker threads, and how a writer's work on them is abandoned.

Disk work runs on daemon threads shared by all stores (``POOL``), so that a write stuck
on a hung disk keeps neither a caller nor the process's exit. Each writer submits its work
through its own ``Tracker``, which knows what is still in flight: when a caller stops
waiting (a deadline, a cancellation), its cleanup runs only once the thread still using
the writer's descriptor has returned (``Tracker.after_idle``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

import aiofiles.os
import anyio
import structlog

__all__ = ["POOL", "POOL_THREADS", "Tracker", "WriteSlot", "hop", "on_loop", "write_slot"]

log = structlog.get_logger("toolbatch.artifacts")

_T = TypeVar("_T")

POOL_THREADS: Final = 32
"""Daemon threads the stores share for disk work (a hung disk holds one each)."""


class DaemonPool(concurrent.futures.Executor):
    """Runs disk work on daemon threads, started on demand up to ``max_threads``.

    Daemon threads, unlike ``ThreadPoolExecutor``'s: a write stuck on a hung disk must not
    keep the process from exiting (an unpublished part is swept by the next store).
    """

    def __init__(self, max_threads: int) -> None:
        self._work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._work = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._max = max_threads

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._work.put((future, functools.partial(fn, *args, **kwargs)))
        with self._lock:
            if self._idle:
                self._idle -= 1
                return future
            if self._threads >= self._max:
                return future
            self._threads += 1
        threading.Thread(target=self._serve, name="toolbatch-artifacts", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            future, work = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = work()
                except BaseException as exc:  # handed to the waiting side, like an executor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            # An idle thread must not keep its last work's arguments (a stream's 16 MiB
            # flush) alive until it gets the next: a reference each, they added up.
            del future, work
            result = None
            with self._lock:
                self._idle += 1


POOL: Final = DaemonPool(POOL_THREADS)


class Tracker(concurrent.futures.Executor):
    """One writer's work on the pool: what it has in flight, and what runs once it is done.

    Passed to ``aiofiles`` as the executor, so that a writer whose caller stopped waiting
    can have its cleanup run *after* the thread still using its descriptor returns.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._after: list[Callable[[], None]] = []

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        with self._lock:
            self._running += 1
        future = POOL.submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        del future
        with self._lock:
            self._running -= 1
            if self._running or not self._after:
                return
            after, self._after = self._after, []
        for work in after:
            _run_logged(work)

    def after_idle(self, work: Callable[[], None], *, in_thread: bool = False) -> None:
        """Run ``work`` once nothing of this writer is in flight: now, in this thread, when
        nothing is (a close and an unlink), or in a pool thread if ``in_thread``; else in
        the thread that finishes last."""
        with self._lock:
            if self._running:
                self._after.append(work)
                return
        if in_thread:
            POOL.submit(_run_logged, work)
            return
        _run_logged(work)


def _run_logged(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception as exc:  # background cleanup: reported, never raised into a pool thread
        log.error("artifacts.cleanup_failed", error=repr(exc))


def on_loop(loop: asyncio.AbstractEventLoop, work: Callable[..., None], *args: Any) -> None:
    """Run ``work`` on ``loop`` (from a pool thread); a closed loop has no one to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(work, *args)


async def hop(tracker: concurrent.futures.Executor, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` on the store's threads through ``aiofiles.os.wrap``."""
    result: _T = await aiofiles.os.wrap(work)(*args, executor=tracker)
    return result


class WriteSlot:
    """One of a persistence pass's concurrent writes, held while a one-shot write uses the
    disk and given back as soon as its file has its name (renamed or linked into place):
    the wait for the directory fsync that makes the name durable holds neither the slot nor
    a thread, so the pass's next file is written meanwhile.

    ``async with WriteSlot(limiter):`` around ``persist``; the store finds it through
    ``write_slot()`` (a context variable: the slot belongs to the task that holds it).
    """

    __slots__ = ("_held", "_limiter", "_token")

    def __init__(self, limiter: anyio.CapacityLimiter) -> None:
        self._limiter = limiter
        self._held = False
        self._token: contextvars.Token[WriteSlot | None] | None = None

    async def __aenter__(self) -> WriteSlot:
        await self._limiter.acquire_on_behalf_of(self)
        self._held = True
        self._token = _SLOT.set(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _SLOT.reset(self._token)
            self._token = None
        self.give_back()

    def give_back(self) -> None:
        """Free the slot now (on its event loop); leaving the block then frees nothing."""
        if self._held:
            self._held = False
            self._limiter.release_on_behalf_of(self)


_SLOT: contextvars.ContextVar[WriteSlot | None] = contextvars.ContextVar(
    "toolbatch_write_slot", default=None
)


def write_slot() -> WriteSlot | None:
    """The write slot the current task holds, if any."""
    return _SLOT.get()
