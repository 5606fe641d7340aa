"""Group commit: one ``fsync`` of a directory covers every rename made before it started.

A published artifact is durable only once its directory entry is: a rename must be
followed by a directory fsync before its path is handed out. Concurrent writers in one
directory share them: while one fsync runs, every rename that asks meanwhile waits for
the next one, which covers them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["DirSync"]


@dataclass(slots=True, eq=False)
class DirSync:
    """The renames of one directory waiting to be made durable.

    ``requested`` counts the renames waiting to be made durable, ``completed`` how many
    of them a finished fsync covers; ``running`` is set while one is under way. Writers
    wait in their worker thread, so a published file costs no hop back to the event loop.
    """

    changed: threading.Condition = field(default_factory=threading.Condition)
    requested: int = 0
    completed: int = 0
    running: bool = False

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
                covers = self.requested
                self.running = True
                self.changed.release()
                try:
                    sync()
                finally:
                    self.changed.acquire()
                    self.running = False
                    self.changed.notify_all()
                self.completed = max(self.completed, covers)
