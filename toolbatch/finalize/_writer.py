"""Persistence for one finalizer pass: bounded concurrency, one deadline, distinct ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import structlog

from toolbatch._core import ToolCallResponse
from toolbatch.artifacts import ArtifactStore, WriteSlot

log = structlog.get_logger("toolbatch.finalize")


class Writer:
    """Persistence for one pass: bounded concurrency, one deadline, distinct ids.

    The deadline is ``timeout_s`` after the pass's first write starts (the media check's or
    the cut responses'), asked then when it is a function: most passes write nothing and
    never read the clock.
    """

    def __init__(
        self,
        store: ArtifactStore | None,
        responses: Sequence[ToolCallResponse],
        concurrency: int,
        timeout_s: float | Callable[[], float],
    ) -> None:
        self.store = store
        self._responses = responses
        self._ids: list[str] | None = None  # made when first needed: most passes write nothing
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._deadline: float | None = None

    def remaining_s(self) -> float:
        """The seconds left before the pass's deadline (which starts with this first ask)."""
        now = anyio.current_time()
        if self._deadline is None:
            timeout_s = self._timeout_s
            self._deadline = now + (timeout_s() if callable(timeout_s) else timeout_s)
        return max(0.0, self._deadline - now)

    def id_of(self, owner: int) -> str:
        if self._ids is None:
            self._ids = _persistence_ids(self._responses)
        return self._ids[owner]

    async def write_all(
        self, jobs: dict[object, tuple[str, str, str | bytes, str]]
    ) -> dict[object, Path]:
        """Write each job ``key -> (id, tool, text or bytes, suffix)``; the paths written."""
        written: dict[object, Path] = {}
        if self.store is None or not jobs:
            return written
        store = self.store
        limiter = anyio.CapacityLimiter(self._concurrency)

        async def one(key: object, job: tuple[str, str, str | bytes, str]) -> None:
            call_id, tool, content, suffix = job
            async with WriteSlot(limiter):  # freed once the file is renamed into place
                try:
                    if isinstance(content, bytes):
                        path = await store.persist_bytes(call_id, tool, content, suffix=suffix)
                    else:
                        path = await store.persist(call_id, tool, content)
                except Exception as exc:  # any store failure: the cap must still hold
                    log.warning(
                        "finalize.persist_failed",
                        call_id=call_id,
                        tool=tool,
                        size=len(content),
                        error_type=type(exc).__name__,
                        error=str(exc),
                    )
                else:
                    written[key] = path

        remaining = self.remaining_s()
        with anyio.move_on_after(remaining) as scope:
            async with anyio.create_task_group() as group:
                for key, job in jobs.items():
                    group.start_soon(one, key, job)
        if scope.cancelled_caught:
            log.warning(
                "finalize.persist_deadline",
                files=len(jobs),
                written=len(written),
                deadline_s=round(remaining, 3),
            )
        return written


def _persistence_ids(responses: Sequence[ToolCallResponse]) -> list[str]:
    """An id per response, distinct even when call ids repeat in the batch.

    A call id used once is kept. The k-th response with a repeated id gets ``<id>-k``
    (counting every response of the batch, so a response keeps its id over repeated
    passes), skipping any id another response of the batch has. Two responses therefore
    never share a file, even when their content is identical.
    """
    counts = Counter(response.call_id for response in responses)
    taken = set(counts)
    next_suffix: dict[str, int] = {}
    ids: list[str] = []
    for response in responses:
        call_id = response.call_id
        if counts[call_id] == 1:
            ids.append(call_id)
            continue
        suffix = next_suffix.get(call_id, 1)
        while (candidate := f"{call_id}-{suffix}") in taken:
            suffix += 1
        taken.add(candidate)
        next_suffix[call_id] = suffix + 1
        ids.append(candidate)
    return ids
