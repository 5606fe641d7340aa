"""Persistence with a deadline: every caller of the store stops waiting in time.

A producer that finished must not lose its output because the disk is slow: it persists
with :func:`persist_within` (or commits a stream with :func:`commit_within`), which waits
no later than a deadline and then answers why there is no file instead of a path. The
store's worker threads are never waited for past it: a write that was still under way is
cleaned up in the background, when its thread returns, and logged
(``artifacts.persist_abandoned``), so a listed path always holds the whole content.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

import anyio
import structlog

from toolbatch.artifacts._store import ArtifactStore, ArtifactStream
from toolbatch.errors import ToolbatchError

__all__ = [
    "DEFAULT_PERSIST_TIMEOUT_S",
    "PERSIST_RESERVE_S",
    "commit_within",
    "persist_deadline",
    "persist_within",
]

log = structlog.get_logger("toolbatch.artifacts")

DEFAULT_PERSIST_TIMEOUT_S: Final = 30.0
"""The longest one persist is waited for when nothing sets an earlier deadline."""
PERSIST_RESERVE_S: Final = 0.25
"""A persist bounded by a caller's deadline gives up this much earlier, so the caller
still has time to answer with the preview instead of being cancelled with nothing."""


def persist_deadline(*deadlines: float | None) -> float:
    """When a persist starting now stops waiting, on the anyio clock.

    ``DEFAULT_PERSIST_TIMEOUT_S`` from now, and no later than ``PERSIST_RESERVE_S``
    before each given deadline (``None`` is no deadline) or before the deadline of the
    cancel scopes around the caller. A deadline that already passed gives none at all.
    """
    now = anyio.current_time()
    bound = now + DEFAULT_PERSIST_TIMEOUT_S
    for deadline in (*deadlines, anyio.current_effective_deadline()):
        if deadline is not None and not math.isinf(deadline):
            bound = min(bound, deadline - PERSIST_RESERVE_S)
    return max(now, bound)


def _late(deadline: float, started: float) -> str:
    waited = max(0.0, deadline - started)
    return (
        f"the artifact store did not finish writing it within {waited:.3g} s (the write "
        f"is removed in the background)"
    )


async def persist_within(
    store: ArtifactStore,
    call_id: str,
    tool_name: str,
    content: str | bytes,
    *,
    deadline: float | None = None,
    suffix: str = ".bin",
) -> Path | str:
    """Persist ``content`` (text, or bytes with ``suffix``), waiting until ``deadline``.

    Returns the path written (or reused), or why there is none: the store failed (a cap,
    both directories unwritable) or the deadline passed first. Never raises for the
    store's sake; cancellation from outside is raised as usual.

    Args:
        deadline: on the anyio clock (default: :func:`persist_deadline` of nothing).
    """
    until = persist_deadline(deadline)
    started = anyio.current_time()
    with anyio.move_on_after(until - started) as scope:
        try:
            if isinstance(content, bytes):
                return await store.persist_bytes(call_id, tool_name, content, suffix=suffix)
            return await store.persist(call_id, tool_name, content)
        except (ToolbatchError, OSError) as exc:
            return str(exc)
    assert scope.cancelled_caught
    log.warning("artifacts.persist_deadline", call_id=call_id, tool=tool_name, size=len(content))
    return _late(until, started)


async def commit_within(stream: ArtifactStream, *, deadline: float | None = None) -> Path | str:
    """Commit ``stream``, waiting until ``deadline``: its path, or why there is none.

    Past the deadline the stream is abandoned: its file is removed once the write under
    way returns (leaving the stream's block discards nothing more).
    """
    until = persist_deadline(deadline)
    started = anyio.current_time()
    with anyio.move_on_after(until - started) as scope:
        try:
            return await stream.commit()
        except (ToolbatchError, OSError) as exc:
            return str(exc)
    assert scope.cancelled_caught
    log.warning("artifacts.commit_deadline", call_id=stream.call_id, kept=stream.bytes_kept)
    return _late(until, started)
