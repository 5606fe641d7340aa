"""Pausing the cyclic garbage collector over one synchronous burst of allocations.

Rebuilding thousands of cut responses allocates some ten container objects each, all of
which outlive the burst. With the collector on, that many survivors trigger young
collections every 700 allocations and, with a large heap, full collections that walk every
live object (tens of milliseconds each) for objects that are not garbage. Pausing the
collector for the burst (no ``await`` inside, so no other task runs meanwhile) defers that
work to the next allocation after it, once.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType

__all__ = ["collector_paused"]

_lock = threading.Lock()
_depth = 0
_we_disabled = False


class _Paused:
    """The context manager :func:`collector_paused` returns (one, stateless: the state is
    the module's, shared by every thread). A class rather than a generator: entered a few
    times per turn, its cost shows on a one-call batch."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _we_disabled
        with _lock:
            if _depth == 0:
                _we_disabled = gc.isenabled()
                if _we_disabled:
                    gc.disable()
            _depth += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _depth, _we_disabled
        with _lock:
            _depth -= 1
            if _depth == 0 and _we_disabled:
                _we_disabled = False
                gc.enable()


_PAUSED = _Paused()


def collector_paused() -> _Paused:
    """Pause the cyclic garbage collector for a synchronous block, then restore it.

    Re-entrant and thread-safe: the first block to enter disables the collector (only if it
    was enabled), the last one to leave enables it again. A collector the caller disabled
    stays disabled; one that another thread disables while a block runs (a few
    milliseconds) is enabled again when it ends. Never hold it across an ``await``: other
    tasks would run without it.
    """
    return _PAUSED
