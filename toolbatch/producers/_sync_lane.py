"""Sync tool functions on a lane of worker threads that hands their results back in bulk.

A sync ``@tool`` runs in a worker thread so it cannot block the event loop. One thread hop
per call through ``anyio.to_thread.run_sync`` costs a wake-up of the loop per result, and on
a busy loop each finished thread then waits for the GIL the loop holds: 10,000 trivial calls
took about 380 µs each. A lane keeps that cost per *round* instead of per call:

* calls go into one queue; a thread that holds the GIL runs every call queued behind the
  one it took without waiting for the loop;
* a finished call's result is put on a list, and only the first result of a round asks the
  loop to wake (``call_soon_threadsafe``); the loop then settles every finished call at once.

What each call keeps: its own future, so its own timeout and cancellation (a cancelled call
is abandoned, its thread finishes it and the result is dropped, as with
``abandon_on_cancel=True``); a copy of the caller's context variables; and anyio's
worker-thread state (``anyio.from_thread`` works inside the tool). A thread is started
whenever more calls wait than threads are idle, so a call that hangs never holds up the
ones queued after it; at most ``MAX_THREADS`` exist per event loop, and each ends after
``IDLE_S`` without work. Outside asyncio (or should anyio's worker-thread hooks be missing)
calls fall back to ``anyio.to_thread.run_sync``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final, TypeVar

import anyio.to_thread

try:  # anyio's own worker-thread state, so that anyio.from_thread works in a tool
    from anyio._backends._asyncio import AsyncIOBackend
    from anyio._core._eventloop import claim_worker_thread, threadlocals
except ImportError:  # pragma: no cover - another anyio layout: use its thread pool
    claim_worker_thread = None  # type: ignore[assignment]

__all__ = ["MAX_THREADS", "run_sync_on_lane"]

T = TypeVar("T")

MAX_THREADS: Final = 40
"""Threads per event loop (anyio's default thread limit); more calls wait their turn."""
IDLE_S: Final = 10.0
"""A lane thread with nothing to do for this long ends."""

_Item = tuple["asyncio.Future[Any]", contextvars.Context, Callable[[], Any]]


class _Lane:
    """The worker threads of one event loop, their queue and their finished calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # The lanes are keyed weakly by their loop, so a lane holds no reference to it; a
        # thread holds the loop while it lives (at most IDLE_S past its last call).
        del loop
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._pending = 0
        self._finished: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._wake_asked = False

    async def run(self, loop: asyncio.AbstractEventLoop, func: Callable[[], T]) -> T:
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._pending += 1
            start = self._pending > self._idle and self._threads < MAX_THREADS
            if start:
                self._threads += 1
                self._idle += 1  # counted before it runs, so the next call sees it
        if start:
            thread = threading.Thread(
                target=self._work, args=(loop,), name="toolbatch-sync-tool", daemon=True
            )
            thread.start()
        self._queue.put((future, contextvars.copy_context(), func))
        return await future

    def _work(self, loop: asyncio.AbstractEventLoop) -> None:
        assert claim_worker_thread is not None
        with claim_worker_thread(AsyncIOBackend, loop):
            threadlocals.current_cancel_scope = None
            while True:
                try:
                    future, context, func = self._queue.get(timeout=IDLE_S)
                except queue.Empty:
                    with self._lock:
                        if self._pending:  # a call is on its way to this idle thread
                            continue
                        self._idle -= 1
                        self._threads -= 1
                    return
                with self._lock:
                    self._pending -= 1
                    self._idle -= 1
                ok, value = True, None
                if not future.cancelled():  # abandoned before it started: skip it
                    try:
                        value = context.run(func)
                    except BaseException as exc:  # handed to the caller, like a thread hop
                        ok, value = False, exc
                self._finish(loop, future, ok, value)
                with self._lock:
                    self._idle += 1

    def _finish(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], ok: bool, value: Any
    ) -> None:
        with self._lock:
            self._finished.append((future, ok, value))
            ask = not self._wake_asked
            self._wake_asked = True
        if ask:
            try:
                loop.call_soon_threadsafe(self._settle)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                with self._lock:
                    self._finished.clear()
                    self._wake_asked = False

    def _settle(self) -> None:
        with self._lock:
            finished = self._finished
            self._finished = []
            self._wake_asked = False
        for future, ok, value in finished:
            if future.done():  # cancelled meanwhile: the call was abandoned
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_LANES: Final[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane]] = (
    weakref.WeakKeyDictionary()
)


async def run_sync_on_lane(func: Callable[[], T]) -> T:
    """Run ``func()`` in a lane thread of the running event loop and return its result.

    Cancelling the caller abandons the call (its thread finishes it; the result is
    dropped). Outside asyncio this is ``anyio.to_thread.run_sync(func,
    abandon_on_cancel=True)``.
    """
    loop: asyncio.AbstractEventLoop | None = None
    if claim_worker_thread is not None:
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
    if loop is None:
        return await anyio.to_thread.run_sync(func, abandon_on_cancel=True)
    lane = _LANES.get(loop)
    if lane is None:
        lane = _LANES[loop] = _Lane(loop)
    return await lane.run(loop, func)
