"""The one-shot durable write: output already in memory, published once.

A one-shot write is one hop to the store's threads. Its bytes are written through
``aiofiles`` in one call (its file object, ``AsyncFileIO``, over the attempt's ``_Part``),
and the thread that takes that call does the rest before it returns (``_ThenFinish``): the
temp part is created and written (ASCII text from the string's own bytes, not a copy:
``ascii_bytes``), the disk told to start on the bytes
(``sync_file_range`` where Linux has it), the digest that names the file computed, the name
claimed, the data fsynced and the file given its name. The part has no name until then
(``O_TMPFILE``; ``_files.open_unnamed``): nobody can open or sweep it, a writer that dies
leaves nothing, and an artifact already holding the name shows up when the part is named
(``EEXIST``: the same bytes are reused, anything else is replaced), so the name needs no
lookup first. Where the file system has no ``O_TMPFILE``, the part is a named, locked
``.tmp-*.part`` looked up and renamed as before. The thread is then free, and so is the
write's slot in its persistence pass (``WriteSlot``): the pass's next file is written
while this one waits, on the event loop, for a directory fsync that started after it was
named (shared with concurrent writers: ``DirSync.durable``). Only then is its path
returned.

Measured on 100 files of 1 MB, eight at a time (issue 33): an unnamed part makes 8 system
calls a file where the named one made 12 (lock, sweep check, two lookups), and the write
reaches the store's floor (a bench diagnostic: the least asyncio code with the same
``aiofiles`` write and per-path durability) within the noise; each of those calls was a GIL
round trip for every writer thread (``bench/README.md``, issue 33).

Cancelled, a write returns at once and its work is *abandoned*: when its thread returns
(in a pool thread, if none was at work), the temp part is removed, and so is a file it had
published meanwhile (nobody was given its path); its reservation and its name are
released, and ``artifacts.persist_abandoned`` is logged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import structlog
from aiofiles.threadpool.binary import AsyncFileIO

from toolbatch.artifacts import _files
from toolbatch.artifacts._files import (
    holds,
    link_unnamed,
    name_unnamed,
    open_temp,
    open_unnamed,
    rename_into_place,
    unlink_quietly,
)
from toolbatch.artifacts._naming import ascii_bytes, digest_prefix
from toolbatch.artifacts._workers import Tracker, hop, on_loop, write_slot
from toolbatch.errors import ArtifactWriteError

if TYPE_CHECKING:
    from toolbatch.artifacts._store import ArtifactStore

__all__ = ["OneShot", "put", "put_with_fallback", "settle"]

log = structlog.get_logger("toolbatch.artifacts")

_T = TypeVar("_T")


@dataclass(slots=True, eq=False)
class OneShot:
    """One ``persist`` in progress, and what its worker thread learned on the way.

    ``content`` is bytes, or text known to be ASCII, so that ``len(content)`` is its size
    in bytes either way; the thread writes text from the string's own bytes (``data``).
    """

    call_id: str
    tool_name: str
    content: str | bytes
    suffix: str
    claim: anyio.Event
    """Set once this persist is over; others writing the same name wait for it."""
    name: str | None = None
    data: bytes | memoryview | None = None
    """``content``'s bytes, as its thread first got them (a view of ASCII text's own bytes,
    no copy: ``ascii_bytes``); kept for a retry, and alive as long as ``content`` is."""
    busy: anyio.Event | None = None
    """Another persist was writing the same name: wait for it, then look again."""
    reused: bool = False
    abandoned: bool = False
    """Its caller stopped waiting while a thread still worked: the cleanup settles it."""


@dataclass(slots=True, eq=False)
class _Attempt:
    """One try at writing a one-shot job in one directory: what its threads made so far."""

    fd: int | None = None
    tmp: str | None = None
    published: Path | None = None
    abandoned: bool = False


class _Part:
    """The temp part of one attempt, as the file object ``aiofiles`` writes through: its
    one ``write``, in a worker thread, creates and opens the part (kept on ``attempt`` even
    if its caller left meanwhile, so the cleanup finds it) and writes every byte of
    ``job``'s content (ASCII text as the string's own bytes, kept as ``job.data`` for a
    retry), so a one-shot write is a single hop to the store's threads (``_ThenFinish``
    finishes it in the same thread)."""

    __slots__ = ("_attempt", "_directory", "_job")

    def __init__(self, directory: Path, job: OneShot, attempt: _Attempt) -> None:
        self._directory = directory
        self._job = job
        self._attempt = attempt

    def write(self, content: str | bytes) -> int:
        job, attempt = self._job, self._attempt
        if attempt.abandoned:  # its caller left before this thread started: do nothing
            return 0
        attempt.fd = open_unnamed(self._directory)
        if attempt.fd is None:  # no O_TMPFILE here: a named, locked part
            attempt.fd, attempt.tmp = open_temp(self._directory)
        if job.data is None:
            job.data = ascii_bytes(content) if isinstance(content, str) else content
        raw = io.FileIO(attempt.fd, "wb", closefd=False)
        view = memoryview(job.data)
        while view:  # a regular file takes the whole buffer; the loop is for a short write
            view = view[raw.write(view) :]
        return len(job.data)


def settle(store: ArtifactStore, job: OneShot, *, released: int) -> None:
    """On the event loop: give back ``released`` reserved bytes and ``job``'s name."""
    store._release(released)
    if job.name is not None and store._inflight.get(job.name) is job.claim:
        del store._inflight[job.name]
    job.claim.set()


async def put_with_fallback(store: ArtifactStore, job: OneShot) -> Path:
    """Publish ``job`` in the store's root, else in its fallback directory, or find it."""
    directory = store.root
    primary_error: OSError | None = None
    while True:
        try:
            path = await store._put(directory, job)
        except OSError as error:
            if primary_error is not None:
                raise ArtifactWriteError(
                    primary_dir=store.root,
                    primary_error=primary_error,
                    fallback_dir=store.fallback_dir,
                    fallback_error=error,
                ) from error
            log.warning("artifacts.primary_failed", directory=str(store.root), error=str(error))
            primary_error = error
            directory = store.fallback_dir
            continue
        if path is not None:
            return path
        assert job.busy is not None
        await job.busy.wait()
        job.busy = None


async def put(store: ArtifactStore, directory: Path, job: OneShot) -> Path | None:
    """Publish ``job`` in ``directory`` durably, or find it there.

    Returns the path (``job.reused`` tells a found one), or ``None`` when another
    persist is writing the same name (``job.busy``). The bytes go through ``aiofiles``
    (``AsyncFileIO`` on the temp part); the data is fsynced before the rename, and a
    directory fsync that started after the rename has finished before this returns
    (``ArtifactStore._durable``), so the path is durable before anyone is given it.
    Cancelled, it returns at once and leaves the rest to ``_clean_up``.
    """
    tracker = Tracker()
    attempt = _Attempt()
    loop = asyncio.get_running_loop()
    try:
        if job.name is not None:  # named by an earlier attempt: its bytes are known
            assert job.data is not None
            found = await hop(tracker, _claim, store, job, job.data)
            if found is not None or job.busy is not None:
                return found
        # One hop: the thread that writes the part through ``aiofiles`` (its file object,
        # ``AsyncFileIO``) goes on to finish it (name, claim, fsync, rename). The part is
        # not a ``BinaryIO`` and takes ASCII text as well as bytes, whose own bytes that
        # thread writes (an encode on the event loop cost a fifth of the throughput).
        slot = write_slot()
        finish = _ThenFinish(tracker, functools.partial(_finish, store, directory, job, attempt))
        part = AsyncFileIO(_Part(directory, job, attempt), None, finish)  # type: ignore[arg-type]
        await part.write(job.content)  # type: ignore[arg-type]
        assert finish.done
        path = finish.path
        if path is None or job.reused:  # another persist holds the name, or it was found
            return path
        # Renamed into place: the disk is free for the pass's next file while this waits,
        # holding no thread, for a directory fsync that makes the rename durable.
        if slot is not None:
            slot.give_back()
        try:
            await store._durable(path)
        except OSError:  # its rename is not durable: the file is never handed out
            attempt.published = None
            await hop(tracker, unlink_quietly, os.fspath(path))
            raise
        return path
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            attempt.abandoned = job.abandoned = True
        # A published file is removed in a thread: an unlink can wait on a slow disk.
        cleanup = functools.partial(_clean_up, store, job, attempt, loop)
        tracker.after_idle(cleanup, in_thread=attempt.published is not None)
        raise


class _ThenFinish(concurrent.futures.Executor):
    """The executor of a part's one ``aiofiles`` write (``_Part.write`` writes every byte or
    raises): the thread that ran it goes on to ``finish`` the part (name, claim, fsync,
    rename) before the write returns, with no hop back to the event loop in between."""

    def __init__(self, tracker: Tracker, finish: Callable[[], Path | None]) -> None:
        self._tracker = tracker
        self._finish = finish
        self.done = False
        self.path: Path | None = None

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        def write_then_finish() -> _T:
            written = fn(*args, **kwargs)
            self.path = self._finish()
            self.done = True
            return written

        return self._tracker.submit(write_then_finish)


def _finish(store: ArtifactStore, directory: Path, job: OneShot, attempt: _Attempt) -> Path | None:
    """In a worker thread: name, claim, fsync and rename a written temp part into place
    (``put`` then waits for the directory fsync that makes the rename durable).

    A part whose caller left meanwhile is neither synced nor published: the cleanup
    removes it once this thread returns.
    """
    if attempt.abandoned:
        return None
    data = job.data
    assert data is not None
    assert attempt.fd is not None
    fd = attempt.fd
    try:
        if _files.start_writeback is not None:
            _files.start_writeback(fd)
        unnamed = attempt.tmp is None
        if job.name is None:
            hasher = digest_prefix(job.call_id)
            hasher.update(data)  # XXH3 releases the GIL, and is done in about 50 µs a MB
            job.name = store.artifact_name(
                job.call_id, job.tool_name, hasher.hexdigest(), job.suffix
            )
            # An unnamed part finds an artifact in its own directory when it is named
            # (EEXIST): only one that may be elsewhere is looked for now.
            look = not unnamed or directory != store.root or store._maybe_in_fallback(job.name)
            found = _claim(store, job, data, look=look)
            if found is not None or job.busy is not None:
                return found
        store.sync_file(fd)
        final = directory / job.name
        if unnamed and not link_unnamed(fd, final):  # the name is taken
            if holds(directory, final, len(data), data):  # by the same artifact: reused
                job.reused = True
                return final
            # By something else (a planted file, a symlink): it is replaced.
            attempt.tmp = name_unnamed(fd, directory)
        if attempt.tmp is not None:
            rename_into_place(attempt.tmp, final)  # still open, so still locked
            attempt.tmp = None
    finally:
        attempt.fd = None
        os.close(fd)
        if attempt.tmp is not None:
            unlink_quietly(attempt.tmp)
            attempt.tmp = None
    attempt.published = final
    return final


def _clean_up(
    store: ArtifactStore, job: OneShot, attempt: _Attempt, loop: asyncio.AbstractEventLoop
) -> None:
    """In a worker thread, once the attempt's threads returned: remove what it left.

    A failed attempt leaves at most its temp part. An abandoned one also loses a file
    it published after its caller stopped waiting (nobody was given the path); its
    reservation and name are then released on the event loop.
    """
    if attempt.fd is not None:
        with contextlib.suppress(OSError):
            os.close(attempt.fd)
        attempt.fd = None
    if attempt.tmp is not None:
        unlink_quietly(attempt.tmp)
        attempt.tmp = None
    if not attempt.abandoned:
        return
    removed = attempt.published
    if removed is not None and not job.reused:
        unlink_quietly(os.fspath(removed))
    log.warning(
        "artifacts.persist_abandoned",
        call_id=job.call_id,
        tool=job.tool_name,
        size=len(job.content),
        removed=str(removed) if removed is not None else None,
    )
    on_loop(loop, functools.partial(settle, store, job, released=len(job.content)))


def _claim(
    store: ArtifactStore, job: OneShot, data: bytes | memoryview, *, look: bool = True
) -> Path | None:
    """Claim ``job.name``, unless another persist holds it (then ``job.busy`` is set);
    an artifact already holding ``data`` under that name is returned (reused), if ``look``."""
    assert job.name is not None
    holder = store._inflight.setdefault(job.name, job.claim)
    if holder is not job.claim:
        job.busy = holder
        return None
    existing = store._find_existing(job.name, len(data), data) if look else None
    job.reused = existing is not None
    return existing
