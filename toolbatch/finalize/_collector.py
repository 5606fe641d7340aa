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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_depth = 0
_we_disabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a synchronous block, then restore it.

    Re-entrant and thread-safe: the first block to enter disables the collector (only if it
    was enabled), the last one to leave enables it again. A collector the caller disabled
    stays disabled; one that another thread disables while a block runs (a few
    milliseconds) is enabled again when it ends. Never hold it across an ``await``: other
    tasks would run without it.
    """
    global _depth, _we_disabled
    with _lock:
        if _depth == 0:
            _we_disabled = gc.isenabled()
            if _we_disabled:
                gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _we_disabled:
                _we_disabled = False
                gc.enable()
