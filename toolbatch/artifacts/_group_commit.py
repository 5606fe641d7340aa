"""Group commit: one ``fsync`` of a directory covers every rename made before it started.

A published artifact is durable only once its directory entry is: a rename must be
followed by a directory fsync before its path is handed out. Concurrent writers in one
directory share them: while one fsync runs, every rename that asks meanwhile waits for
the next one, which covers them all.

Two kinds of writer wait. A stream's commit waits in its worker thread
(``wait_durable``), and may run the fsync itself. A one-shot write waits on its event
loop (``durable``), holding no thread: its worker thread is free once the file is
renamed, and so is its write slot (``WriteSlot``), so the next file is being written
while the directory fsync runs. One pool thread runs the fsyncs the waiting loops need,
back to back, until none waits; a hung directory then holds that one thread, not one per
writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from toolbatch.artifacts._workers import POOL

__all__ = ["DirSync"]


@dataclass(slots=True, eq=False)
class _Waiter:
    ticket: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


@dataclass(slots=True, eq=False)
class DirSync:
    """The renames of one directory waiting to be made durable.

    ``requested`` counts the renames that asked, ``completed`` how many of them a finished
    fsync covers; ``running`` is set while one is under way, and ``serving`` while a pool
    thread runs them for waiting event loops (``waiting``, in ticket order).
    """

    changed: threading.Condition = field(default_factory=threading.Condition)
    requested: int = 0
    completed: int = 0
    running: bool = False
    serving: bool = False
    waiting: list[_Waiter] = field(default_factory=list)

    def wait_durable(self, sync: Callable[[], None]) -> None:
        """In a worker thread: return once a directory fsync (``sync``) that started after
        this call has finished.

        A failed fsync is raised to the writer that ran it; the others run their own.
        """
        with self.changed:
            self.requested += 1
            mine = self.requested
            while self.completed < mine:
                if self.running:
                    self.changed.wait()
                    continue
                error = self._sync(sync)
                if error is not None:
                    raise error

    async def durable(self, sync: Callable[[], None]) -> None:
        """On an event loop, after a rename: return once a directory fsync (``sync``) that
        started after this call has finished, without holding a thread meanwhile.

        Raises ``OSError`` when the fsync that covered this rename failed (each waiter it
        covered gets its own). Cancelled, the waiter is dropped when the next fsync ends.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self.changed:
            self.requested += 1
            self.waiting.append(_Waiter(self.requested, loop, future))
            start = not self.serving
            self.serving = True
        if start:
            POOL.submit(self._serve, sync)
        await future

    def _serve(self, sync: Callable[[], None]) -> None:
        """In a pool thread: run fsyncs until no event loop waits for one."""
        with self.changed:
            while self.waiting:
                if self.running:  # a stream's fsync: it settles the loops it covers
                    self.changed.wait()
                    continue
                self._sync(sync)
            self.serving = False

    def _sync(self, sync: Callable[[], None]) -> BaseException | None:
        """Run one fsync (``changed`` held, released meanwhile); it covers every rename that
        asked before it started. The waiting loops it covers are woken with its outcome;
        the error, if any, is returned."""
        covers = self.requested
        self.running = True
        self.changed.release()
        error: BaseException | None = None
        try:
            sync()
        except BaseException as exc:  # handed to every waiter it covered
            error = exc
        finally:
            self.changed.acquire()
            self.running = False
            self.changed.notify_all()
        if error is None:
            self.completed = max(self.completed, covers)
        covered = [waiter for waiter in self.waiting if waiter.ticket <= covers]
        if covered:
            del self.waiting[: len(covered)]
            _wake(covered, error)
        return error


def _wake(waiters: list[_Waiter], error: BaseException | None) -> None:
    """Settle each waiter's future on its loop: one call a loop, none for a closed loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for waiter in waiters:
        by_loop.setdefault(waiter.loop, []).append(waiter.future)
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, futures, error)


def _settle(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in futures:
        if future.done():  # its writer was cancelled meanwhile
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(_own_error(error))


def _own_error(error: BaseException) -> OSError:
    """A fresh ``OSError`` for one waiter (one exception object raised in several tasks
    would collect all their tracebacks)."""
    if isinstance(error, OSError):
        own = OSError(error.errno, error.strerror or str(error))
    else:
        own = OSError(f"the directory fsync failed: {error!r}")
    own.__cause__ = error
    return own
