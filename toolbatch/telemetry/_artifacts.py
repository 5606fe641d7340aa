"""Persistence: a ``toolbatch.artifact.persist`` span per artifact, and its metrics.

The artifact store is the only code that writes tool output to disk, so its two ways of
writing are decorated: a one-shot write (``ArtifactStore._persist_content``, used by
``persist`` and ``persist_bytes``) and a stream's ``commit``. A write that found an
identical artifact already on disk is marked ``toolbatch.artifact.reused`` and is not
counted again. A write that failed (a cap, both directories) is a failure, counted by its
``error.type`` (the exception's class name) in the span, the turn and
``toolbatch.artifacts.failed``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from toolbatch.telemetry._names import (
    ARTIFACT_BYTES,
    ARTIFACT_DROPPED_BYTES,
    ARTIFACT_KIND,
    ARTIFACT_LOCATION,
    ARTIFACT_REUSED,
    ARTIFACT_STREAMED,
    ERROR_TYPE,
    SPAN_PERSIST,
)
from toolbatch.telemetry._runtime import Otel, never_raises, recording
from toolbatch.telemetry._turn import TurnTelemetry, current_turn

__all__ = ["traced_commit", "traced_persist"]

P = ParamSpec("P")


class ArtifactStore(Protocol):
    """What these decorators read of ``toolbatch.artifacts.ArtifactStore``."""

    @property
    def written(self) -> tuple[Path, ...]: ...

    fallback_dir: Path


class ArtifactStream(Protocol):
    """What ``traced_commit`` reads of ``toolbatch.artifacts.ArtifactStream``."""

    store: Any
    suffix: str
    bytes_kept: int
    bytes_dropped: int


StoreT = TypeVar("StoreT", bound=ArtifactStore)


class _Persist:
    __slots__ = ("_before", "_otel", "_start_ns", "_store", "_turn", "span")

    def __init__(
        self, otel: Otel, turn: TurnTelemetry | None, store: ArtifactStore, attributes: Any
    ) -> None:
        self._otel = otel
        self._turn = turn
        self._store = store
        self._before = len(store.written)
        self._start_ns = time.time_ns()
        self.span = otel.tracer().start_span(
            SPAN_PERSIST,
            kind=otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=self._start_ns,
        )

    @never_raises
    def succeeded(self, path: Path, nbytes: int, *, dropped: int | None = None) -> None:
        if dropped is not None:
            self.span.set_attributes({ARTIFACT_BYTES: nbytes, ARTIFACT_DROPPED_BYTES: dropped})
        store = self._store
        reused = path not in store.written[self._before :]
        location = "fallback" if path.parent == store.fallback_dir else "primary"
        self.span.set_attributes({ARTIFACT_REUSED: reused, ARTIFACT_LOCATION: location})
        self.span.end()
        if reused:
            return
        metrics = self._otel.meters()
        kind = {ARTIFACT_KIND: "text" if path.suffix == ".txt" else "binary"}
        metrics.artifacts.add(1, {**kind, ARTIFACT_LOCATION: location})
        metrics.artifact_bytes.add(nbytes, kind)
        if self._turn is not None:
            self._turn.note_artifact(nbytes)

    @never_raises
    def failed(self, exc: BaseException, *, dropped: int | None = None) -> None:
        if dropped is not None:
            self.span.set_attribute(ARTIFACT_DROPPED_BYTES, dropped)
        if not isinstance(exc, Exception):  # cancelled: nothing failed
            self.span.end()
            return
        otel = self._otel
        error_type = type(exc).__qualname__
        self.span.set_attribute(ERROR_TYPE, error_type)
        self.span.set_status(otel.trace.StatusCode.ERROR)
        self.span.end()
        otel.meters().artifact_failures.add(1, {ERROR_TYPE: error_type})
        if self._turn is not None:
            self._turn.note_artifact(None)


@never_raises
def _begin(store: ArtifactStore, attributes: dict[str, Any]) -> _Persist | None:
    turn = current_turn()
    otel = turn.otel if turn is not None else recording()
    if otel is None:
        return None
    return _Persist(otel, turn, store, attributes)


def traced_persist(
    method: Callable[[StoreT, str, str, str | bytes, str], Awaitable[Path]],
) -> Callable[[StoreT, str, str, str | bytes, str], Awaitable[Path]]:
    """Decorates ``ArtifactStore._persist_content(call_id, tool_name, content, suffix)``,
    whose ``content`` is bytes or ASCII text (its length is its size in bytes)."""

    @functools.wraps(method)
    async def persist_content(
        store: StoreT, call_id: str, tool_name: str, content: str | bytes, suffix: str
    ) -> Path:
        kind = "text" if suffix == ".txt" else "binary"
        persist = _begin(store, {ARTIFACT_BYTES: len(content), ARTIFACT_KIND: kind})
        if persist is None:
            return await method(store, call_id, tool_name, content, suffix)
        try:
            path = await method(store, call_id, tool_name, content, suffix)
        except BaseException as exc:
            persist.failed(exc)
            raise
        persist.succeeded(path, len(content))
        return path

    return persist_content


StreamT = TypeVar("StreamT", bound=ArtifactStream)


def traced_commit(
    method: Callable[Concatenate[StreamT, P], Awaitable[Path]],
) -> Callable[Concatenate[StreamT, P], Awaitable[Path]]:
    """Decorates ``ArtifactStream.commit()``: the span covers publishing the stream."""

    @functools.wraps(method)
    async def commit(stream: StreamT, /, *args: P.args, **kwargs: P.kwargs) -> Path:
        kind = "text" if stream.suffix == ".txt" else "binary"
        persist = _begin(stream.store, {ARTIFACT_KIND: kind, ARTIFACT_STREAMED: True})
        if persist is None:
            return await method(stream, *args, **kwargs)
        try:
            path = await method(stream, *args, **kwargs)
        except BaseException as exc:
            persist.failed(exc, dropped=stream.bytes_dropped)
            raise
        persist.succeeded(path, stream.bytes_kept, dropped=stream.bytes_dropped)
        return path

    return commit
