"""Test doubles for code that embeds toolbatch.

``ScriptedModel`` is a deterministic model (no network): give it a script of batches and
answers, or let it turn ``$ `` lines of a prompt into shell calls. ``SlowDiskStore`` is a
real ``ArtifactStore`` on a slow or hanging disk: each fsync waits first.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from toolbatch.agent import ScriptedModel, ScriptStep
from toolbatch.artifacts import ArtifactStore

__all__ = ["ScriptStep", "ScriptedModel", "SlowDiskStore"]


class SlowDiskStore(ArtifactStore):
    """An ``ArtifactStore`` whose every fsync (file data and directory) is slow or hangs.

    Args:
        root: as for ``ArtifactStore`` (the other options too).
        fsync_delay_s: how long each fsync waits before it runs (a slow disk).
        hang: a disk that never returns: each fsync waits until ``release()`` (call it
            when done, so no thread is left waiting).

    The writes themselves are real; ``fsyncs`` counts the fsyncs that started.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync_delay_s: float = 0.0,
        hang: bool = False,
        **options: object,
    ) -> None:
        self._delay_s = fsync_delay_s
        self._released = threading.Event()
        if not hang:
            self._released.set()
        self.fsyncs = 0
        super().__init__(root, **options)  # type: ignore[arg-type]

    def release(self) -> None:
        """Let every waiting and later fsync go on (a hanging disk comes back)."""
        self._released.set()

    def _wait(self) -> None:
        self.fsyncs += 1
        self._released.wait()
        if self._delay_s:
            threading.Event().wait(self._delay_s)

    def sync_file(self, fd: int) -> None:
        self._wait()
        super().sync_file(fd)

    def sync_directory(self, directory: Path) -> None:
        self._wait()
        super().sync_directory(directory)
