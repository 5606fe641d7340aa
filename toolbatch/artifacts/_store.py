"""The artifact store: the one place that writes tool output to disk.

Complete tool output is kept here so the model can be shown a bounded preview plus a path.
Writes are atomic (a temp file in the same directory, unnamed where Linux allows, fsync,
then its name given, directory fsync; the directory fsync is shared by concurrent writes:
group commit), files are mode 0600 in a 0700 directory, and a symlink planted at a
destination is replaced, never followed. Names come from the call id made safe plus a
digest of the call id and the content (``_naming``), so the same content for the same call
is written once and two calls never overwrite each other. Byte caps (per file, per store)
are reserved before a write starts.

The bytes go through ``aiofiles`` (``aiofiles.open`` on the temp part, ``aiofiles.os`` for
the rest) on the store's own daemon worker threads (``_workers``); the one-shot write is in
``_oneshot``, the streaming writer in ``_stream`` (one hop a flush, through
``aiofiles.os``), the file operations in ``_files``.

A caller is never held by a thread: cancelling a persist (a deadline, an abort) stops the
waiting at once, and the writer's work is *abandoned*: when its thread returns, the temp
part is removed, and so is a file it had published meanwhile (nobody was given its path);
its reservation and its name are released, and ``artifacts.persist_abandoned`` is logged.
A disk that never returns keeps only a daemon thread, never the caller or the process's
exit. ``sync_file`` and ``sync_directory`` are the store's two fsyncs (a subclass may slow
them down to test a slow disk).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final, Literal

import anyio
import structlog

from toolbatch.artifacts._files import (
    check_private_dir,
    default_fallback_dir,
    ensure_dir,
    existing_size,
    fsync_dir,
    holds,
    sweep_stale_parts,
    unlink_quietly,
)
from toolbatch.artifacts._group_commit import DirSync
from toolbatch.artifacts._naming import (
    artifact_name,
    ascii_bytes,
    digest_prefix,
    digest_prefix as _digest_prefix,  # noqa: F401  (bench/_chaos_faults.py)
    encode_text,
    safe_name_component,
    safe_suffix,
)
from toolbatch.artifacts._oneshot import OneShot, put, put_with_fallback, settle
from toolbatch.artifacts._stream import STREAM_FLUSH_BYTES as STREAM_FLUSH_BYTES, ArtifactStream
from toolbatch.artifacts._workers import POOL, hop
from toolbatch.errors import ArtifactCapExceeded, ConfigError, UnsafeDirectory as UnsafeDirectory
from toolbatch.telemetry import traced_persist

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "ArtifactStore",
    "ArtifactStream",
    "safe_name_component",
]

log = structlog.get_logger("toolbatch.artifacts")

DEFAULT_MAX_FILE_BYTES: Final = 64 * 2**20
DEFAULT_MAX_TOTAL_BYTES: Final = 2**30
INLINE_ENCODE_CHARS: Final = 64 * 2**10
"""Non-ASCII texts up to this many code points are encoded on the event loop; longer ones
in a worker thread."""
INLINE_ASCII_CHARS: Final = 64 * 2**10
"""ASCII texts up to this long are encoded on the event loop; the worker thread writes a
longer one from the string's own bytes, with no copy (``_naming.ascii_bytes``; a one-shot
write is one hop either way). Measured (issue 33), 100 texts of 1 MB persisted eight at a
time: encoding them on the loop cost about a fifth of the throughput, and encoding them in
the threads (a 1 MB copy each, into freshly faulted memory, holding the GIL) about 15 % of
the CPU."""
CLEANUP_S: Final = 5.0
FALLBACK_NAMES_KEPT: Final = 4096
"""A store keeps the names in its fallback directory up to this many (``_maybe_in_fallback``)."""


class ArtifactStore:
    """Writes complete tool output to disk, once, within byte caps.

    Args:
        root: the primary directory, created with mode 0700 if missing.
        fallback_dir: where to write when ``root`` cannot be written (default: a per-user
            0700 directory under the system temp dir, ``toolbatch-fallback-<uid>``).

    Either directory is used only while it is a real directory of this user that no one
    else can write (``check_private_dir``): one another user created first (the fallback
    name is predictable), a symlink, or one open to group or others is refused with a
    warning (``artifacts.fallback_refused``, ``artifacts.primary_failed``) and the store
    carries on with the other one, or with none (then the finalizer goes on without a file
    reference). Opening a store removes the temp parts of dead writers from both
    (``sweep_stale_parts``).
        max_file_bytes: the per-file cap in UTF-8 bytes.
        max_total_bytes: the cap on all bytes this store writes.

    Use ``await store.persist(call_id, tool_name, text)`` for output already in memory and
    ``async with store.open_stream(call_id, tool_name) as stream`` for output that arrives
    in chunks.
    """

    stream_class: type[ArtifactStream] = ArtifactStream
    """The streaming writer ``open_stream`` makes (a subclass may swap it, e.g. to inject
    faults)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fallback_dir: str | os.PathLike[str] | None = None,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        for option, value in (
            ("max_file_bytes", max_file_bytes),
            ("max_total_bytes", max_total_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{option} must be a positive int of bytes, got {value!r}")
        self.root = Path(root).absolute()
        self.fallback_dir = (
            Path(fallback_dir).absolute() if fallback_dir is not None else default_fallback_dir()
        )
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self._used = 0
        self._inflight: dict[str, anyio.Event] = {}
        self._written: list[Path] = []
        self._dir_syncs: dict[Path, DirSync] = {}
        self._fallback_names: set[str] | None = set()
        """The files in the fallback directory that a persist may find, or ``None`` when
        there were too many to keep (``_maybe_in_fallback``)."""
        try:
            ensure_dir(self.root)
        except OSError as exc:
            log.warning("artifacts.root_unavailable", root=str(self.root), error=str(exc))
        else:
            sweep_stale_parts(self.root)
        self._open_fallback()

    def _open_fallback(self) -> None:
        """Check an existing fallback directory now (it is created only when needed)."""
        if self.fallback_dir == self.root or not os.path.lexists(self.fallback_dir):
            return
        try:
            check_private_dir(self.fallback_dir)
        except OSError as exc:
            log.warning(
                "artifacts.fallback_refused", directory=str(self.fallback_dir), error=str(exc)
            )
            return
        try:  # one listing: for the sweep, and for the names a persist may find there
            entries: list[os.DirEntry[str]] | None = list(os.scandir(self.fallback_dir))
        except OSError:
            entries = None
        sweep_stale_parts(self.fallback_dir, entries)
        if entries is None or len(entries) > FALLBACK_NAMES_KEPT:
            self._fallback_names = None
        else:
            self._fallback_names = {entry.name for entry in entries}

    @property
    def bytes_used(self) -> int:
        """Bytes written or reserved by this store so far."""
        return self._used

    @property
    def written(self) -> tuple[Path, ...]:
        """Every artifact this store wrote, in order (a reused artifact is not listed again)."""
        return tuple(self._written)

    def artifact_name(self, call_id: str, tool_name: str, digest: str, suffix: str = ".txt") -> str:
        """The file name for ``call_id``'s output of ``tool_name`` with content ``digest``."""
        return artifact_name(call_id, tool_name, digest, suffix)

    # -- reservations -----------------------------------------------------------------

    def _reserve(self, nbytes: int) -> None:
        if nbytes > self.max_file_bytes:
            raise ArtifactCapExceeded("file", limit=self.max_file_bytes, requested=nbytes)
        if self._used + nbytes > self.max_total_bytes:
            raise ArtifactCapExceeded(
                "total", limit=self.max_total_bytes, requested=self._used + nbytes
            )
        self._used += nbytes

    def _reserve_upto(
        self, nbytes: int, already: int
    ) -> tuple[int, Literal["file", "total"] | None]:
        """Reserve as much of ``nbytes`` as the caps allow for a file holding ``already``."""
        room_file = self.max_file_bytes - already
        room_total = self.max_total_bytes - self._used
        granted = max(0, min(nbytes, room_file, room_total))
        self._used += granted
        if granted == nbytes:
            return granted, None
        return granted, "file" if room_file <= room_total else "total"

    def _release(self, nbytes: int) -> None:
        self._used = max(0, self._used - nbytes)

    def _record(self, path: Path) -> None:
        """On the event loop: ``path`` was published by this store."""
        self._written.append(path)
        if path.parent == self.fallback_dir and self._fallback_names is not None:
            self._fallback_names.add(path.name)

    def _maybe_in_fallback(self, name: str) -> bool:
        """Whether an artifact ``name`` may be in the fallback directory: it was there when
        this store opened, or this store wrote it there since. A one-shot write in the root
        looks there only then; the root itself it finds when it names its part (EEXIST).
        A fallback write by another store or process after this store opened is not seen:
        the same output persisted again here is written once more, never lost. A fallback
        directory too full (or unreadable) to list at open is always looked in."""
        return self._fallback_names is None or name in self._fallback_names

    def _find_existing(
        self, name: str, size: int, content: bytes | memoryview | int
    ) -> Path | None:
        """An artifact already holding ``content`` (bytes, or an open file's) at ``name``.

        A file with the right name and size is reused only when its bytes are ``content``
        (compared in full, which is stronger than comparing digests), it is a regular file
        of this user that no one else can write, and its directory is a private one: a
        planted file with an artifact's name and size is never reused.
        """
        for directory in (self.root, self.fallback_dir):
            path = directory / name
            if existing_size(path) == size and holds(directory, path, size, content):
                return path
        return None

    # -- one-shot persistence -----------------------------------------------------------

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        """Write ``text`` completely, as UTF-8, and return the path actually written.

        The same text for the same call id returns the same path without writing again.

        Raises:
            ArtifactCapExceeded: the text would pass a cap; nothing was written.
            ArtifactWriteError: neither the primary nor the fallback directory could be
                written; it carries both causes.
        """
        content: str | bytes = text
        if str.isascii(text):  # its size is its length: a long one is written in the thread
            if len(text) <= INLINE_ASCII_CHARS:
                content = text.encode("ascii")
        elif len(text) <= INLINE_ENCODE_CHARS:
            content = encode_text(text)
        else:
            content = await hop(POOL, encode_text, text)
        return await self._persist_content(call_id, tool_name, content, ".txt")

    async def persist_bytes(
        self, call_id: str, tool_name: str, data: bytes, *, suffix: str = ".bin"
    ) -> Path:
        """Write binary ``data`` completely (media, binary output) and return its path.

        Named and reused like :meth:`persist`; ``suffix`` (e.g. ``".png"``) ends the name.

        Raises:
            ArtifactCapExceeded: the data would pass a cap; nothing was written.
            ArtifactWriteError: neither directory could be written.
        """
        return await self._persist_content(call_id, tool_name, data, safe_suffix(suffix))

    @traced_persist
    async def _persist_content(
        self, call_id: str, tool_name: str, content: str | bytes, suffix: str
    ) -> Path:
        """Persist ``content`` (bytes, or ASCII text: ``len`` is its size) once, durably."""
        size = len(content)
        try:
            self._reserve(size)
        except ArtifactCapExceeded:
            # Full, but an identical artifact needs no room.
            existing = await hop(POOL, self._find_identical, call_id, tool_name, content, suffix)
            if existing is None:
                raise
            log.debug("artifacts.reused", path=str(existing), bytes=size)
            return existing
        job = OneShot(call_id, tool_name, content, suffix, anyio.Event())
        published = False
        try:
            path = await put_with_fallback(self, job)
            published = not job.reused
        finally:
            if not job.abandoned:  # an abandoned job is settled by its cleanup
                settle(self, job, released=0 if published else size)
        if published:
            self._record(path)
            log.debug("artifacts.persisted", path=str(path), bytes=size, call_id=call_id)
        else:
            log.debug("artifacts.reused", path=str(path), bytes=size)
        return path

    async def _put(self, directory: Path, job: OneShot) -> Path | None:
        """Publish ``job`` in ``directory`` durably, or find it there (``_oneshot.put``);
        a subclass may redirect it (the chaos campaign refuses primary writes here)."""
        return await put(self, directory, job)

    def sync_file(self, fd: int) -> None:
        """Make a written file's data durable (``fsync``); runs in a worker thread."""
        os.fsync(fd)

    def sync_directory(self, directory: Path) -> None:
        """Make renames in ``directory`` durable (its ``fsync``); runs in a worker thread."""
        fsync_dir(directory)

    def _publish(self, final: Path) -> None:
        """Make the rename to ``final`` durable (``_sync_dir``); a file whose rename cannot
        be made durable is removed, never handed out."""
        try:
            self._sync_dir(final.parent)
        except BaseException:
            unlink_quietly(os.fspath(final))
            raise

    def _find_identical(
        self, call_id: str, tool_name: str, content: str | bytes, suffix: str
    ) -> Path | None:
        data = ascii_bytes(content) if isinstance(content, str) else content
        hasher = digest_prefix(call_id)
        hasher.update(data)
        name = self.artifact_name(call_id, tool_name, hasher.hexdigest(), suffix)
        return self._find_existing(name, len(data), data)

    def _sync_dir(self, directory: Path) -> None:
        """In a worker thread: return once a directory ``fsync`` that started after this
        call has finished (shared by concurrent writers: ``DirSync``)."""
        self._group(directory).wait_durable(functools.partial(self.sync_directory, directory))

    async def _durable(self, final: Path) -> None:
        """On the event loop, once ``final`` is renamed into place: return once a directory
        fsync that started after this call has finished, holding no thread meanwhile (shared
        by concurrent writers: ``DirSync.durable``). Raises ``OSError`` if it failed."""
        directory = final.parent
        await self._group(directory).durable(functools.partial(self.sync_directory, directory))

    def _group(self, directory: Path) -> DirSync:
        state = self._dir_syncs.get(directory)
        if state is None:
            state = self._dir_syncs.setdefault(directory, DirSync())
        return state

    # -- streaming ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def open_stream(
        self, call_id: str, tool_name: str, *, suffix: str = ".txt"
    ) -> AsyncIterator[ArtifactStream]:
        """A streaming writer for output that arrives in chunks.

        ``await stream.write(chunk)`` as bytes arrive, then ``await stream.commit()`` once
        for the path. Leaving the block without committing discards what was written.
        """
        stream = self.stream_class(self, call_id, tool_name, suffix)
        try:
            yield stream
        finally:
            if not stream.committed:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_S):
                    await stream.discard()
