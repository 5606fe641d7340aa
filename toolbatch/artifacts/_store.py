"""The artifact store: the one place that writes tool output to disk.

Complete tool output is kept here so the model can be shown a bounded preview plus a path.
Writes are atomic (a temp file in the same directory, fsync, rename, directory fsync; the
directory fsync is shared by the renames of concurrent writes: group commit), files
are mode 0600 in a 0700 directory, and a symlink planted at a destination is replaced, never
followed. Names come from the call id made safe plus a digest of the call id and the content,
so the same content for the same call is written once and two calls never overwrite each
other. Byte caps (per file, per store) are reserved before a write starts.

The bytes go through ``aiofiles`` (``aiofiles.open`` on the temp part, ``aiofiles.os`` for
the rest) on the store's own daemon worker threads. A one-shot write is three hops: the
temp part is created and opened, the bytes are written, and one step finishes it: the
disk is told to start on them (``sync_file_range`` where Linux has it), the digest that
names the file is computed while the disk works, the name is claimed, an identical
artifact looked for (found: the temp file is dropped, the artifact is reused), the data
fsynced, the file renamed and the directory fsynced.

A caller is never held by a thread: cancelling a persist (a deadline, an abort) stops the
waiting at once, and the writer's work is *abandoned*: when its thread returns, the temp
part is removed, and so is a file it had published meanwhile (nobody was given its path);
its reservation and its name are released, and ``artifacts.persist_abandoned`` is logged.
A disk that never returns keeps only a daemon thread, never the caller or the process's
exit. ``sync_file`` and ``sync_directory`` are the store's two fsyncs (a subclass may slow
them down to test a slow disk).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import errno
import fcntl
import functools
import hashlib
import os
import queue
import re
import stat
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import aiofiles
import aiofiles.os
import anyio
import structlog

from toolbatch.errors import ArtifactCapExceeded, ArtifactWriteError, ConfigError
from toolbatch.telemetry import traced_commit, traced_persist

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
WRITE_CHUNK_BYTES: Final = 8 * 2**20
"""Bytes per ``write`` system call inside the one executor hop that writes a file."""
STREAM_FLUSH_BYTES: Final = 16 * 2**20
"""A streaming writer buffers this much before it is written (and hashed) off the loop."""
PARALLEL_HASH_BYTES: Final = 1 * 2**20
"""From this size on, a flush hashes in one worker thread while another writes."""
INLINE_ENCODE_CHARS: Final = 64 * 2**10
"""Non-ASCII texts up to this many code points are encoded on the event loop; longer ones
in a worker thread (ASCII text is encoded in the thread that writes it)."""
MAX_ID_CHARS: Final = 64
MAX_TOOL_CHARS: Final = 32
DIGEST_HEX_CHARS: Final = 24
CLEANUP_S: Final = 5.0
COMPARE_CHUNK_BYTES: Final = 1 * 2**20
"""A file considered for reuse is compared with the new content this much at a time."""
TEMP_PREFIX: Final = ".tmp-"
TEMP_SUFFIX: Final = ".part"

_IOV_MAX: Final = 512
_SYNC_FILE_RANGE_WRITE: Final = 2
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name_component(value: str, max_chars: int = MAX_ID_CHARS) -> str:
    """``value`` made safe for a file name: no separators, dots-only or control characters.

    Runs of anything outside ``[A-Za-z0-9._-]`` become one ``_``; leading dots are dropped
    (no ``.``, ``..`` or hidden names); the result is at most ``max_chars`` long and never
    empty.
    """
    cleaned = _UNSAFE.sub("_", value[: max_chars * 8]).lstrip(".")
    return cleaned[:max_chars] or "_"


def safe_suffix(suffix: str) -> str:
    """A file suffix made safe (``.png``); anything odd becomes ``.bin``."""
    cleaned = _UNSAFE.sub("", suffix.lstrip("."))[:12]
    return f".{cleaned}" if cleaned else ".bin"


def _digest_prefix(call_id: str) -> hashlib._Hash:
    hasher = hashlib.sha256(b"toolbatch-artifact\0")
    hasher.update(call_id.encode("utf-8", "surrogatepass"))
    hasher.update(b"\0")
    return hasher


def _encode(text: str) -> bytes:
    # Lone surrogates cannot be UTF-8; keep them visible as \udXXX instead of failing.
    return text.encode("utf-8", "backslashreplace")


def _load_start_writeback() -> Callable[[int], None] | None:
    """``sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`` through libc, where it exists.

    It starts writeback of a file's dirty pages and returns without waiting, so the disk
    takes a file's data while its digest is computed; the fsync that follows only waits
    for what is left. The os module has no binding for it (Python 3.11); elsewhere than
    Linux, or without the symbol, there is none and the fsync alone does the work.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int

    def start_writeback(fd: int) -> None:
        function(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)  # advisory: the fsync reports failures

    return start_writeback


_start_writeback: Final = _load_start_writeback()


def _existing_size(path: Path) -> int | None:
    """The size of a regular file at ``path`` (symlinks and others count as absent)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


_T = TypeVar("_T")

POOL_THREADS: Final = 32
"""Daemon threads the stores share for disk work (a hung disk holds one each)."""


class _DaemonPool(concurrent.futures.Executor):
    """Runs disk work on daemon threads, started on demand up to ``max_threads``.

    Daemon threads, unlike ``ThreadPoolExecutor``'s: a write stuck on a hung disk must not
    keep the process from exiting (an unpublished part is swept by the next store).
    """

    def __init__(self, max_threads: int) -> None:
        self._work: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._work = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._max = max_threads

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._work.put((future, functools.partial(fn, *args, **kwargs)))
        with self._lock:
            if self._idle:
                self._idle -= 1
                return future
            if self._threads >= self._max:
                return future
            self._threads += 1
        threading.Thread(target=self._serve, name="toolbatch-artifacts", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            future, work = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    result = work()
                except BaseException as exc:  # handed to the waiting side, like an executor
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            with self._lock:
                self._idle += 1


_POOL: Final = _DaemonPool(POOL_THREADS)


class _Tracker(concurrent.futures.Executor):
    """One writer's work on the pool: what it has in flight, and what runs once it is done.

    Passed to ``aiofiles`` as the executor, so that a writer whose caller stopped waiting
    can have its cleanup run *after* the thread still using its descriptor returns.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._after: list[Callable[[], None]] = []

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        with self._lock:
            self._running += 1
        future = _POOL.submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        del future
        with self._lock:
            self._running -= 1
            if self._running or not self._after:
                return
            after, self._after = self._after, []
        for work in after:
            _run_logged(work)

    def after_idle(self, work: Callable[[], None]) -> None:
        """Run ``work`` once nothing of this writer is in flight: now, in this thread, when
        nothing is (a close and an unlink), else in the thread that finishes last."""
        with self._lock:
            if self._running:
                self._after.append(work)
                return
        _run_logged(work)


def _run_logged(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception as exc:  # background cleanup: reported, never raised into a pool thread
        log.error("artifacts.cleanup_failed", error=repr(exc))


def _on_loop(loop: asyncio.AbstractEventLoop, work: Callable[..., None], *args: Any) -> None:
    """Run ``work`` on ``loop`` (from a pool thread); a closed loop has no one to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(work, *args)


async def _hop(tracker: concurrent.futures.Executor, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` on the store's threads through ``aiofiles.os.wrap``."""
    result: _T = await aiofiles.os.wrap(work)(*args, executor=tracker)
    return result


class UnsafeDirectory(PermissionError):
    """A directory the store refuses to write to: not a private directory of this user."""


def check_private_dir(directory: Path) -> None:
    """Raise ``UnsafeDirectory`` unless ``directory`` is a real directory of this user that
    no one else may write to (not a symlink, owned by the effective uid, no group or other
    write bit).

    Why that is enough: nobody else can add, replace or rename entries in it, and the
    entry of the directory itself cannot be swapped in a sticky parent such as ``/tmp``.
    """
    info = os.lstat(directory)
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symlink"
    elif not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(directory))
    elif info.st_uid != os.geteuid():
        problem = f"is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
    elif info.st_mode & 0o022:
        problem = f"is writable by others (mode {stat.S_IMODE(info.st_mode):#o})"
    if problem is not None:
        raise UnsafeDirectory(
            errno.EPERM,
            f"refused: it {problem}; artifacts go only to a directory of this user that no "
            f"one else can write (remove it, or choose another)",
            str(directory),
        )


def _holds(directory: Path, path: Path, size: int, content: bytes | int) -> bool:
    """Whether ``path`` is a private regular file of this user whose bytes are ``content``
    (bytes, or the first ``size`` bytes of an open file descriptor)."""
    try:
        check_private_dir(directory)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_size != size
            or info.st_uid != os.geteuid()
            or info.st_mode & 0o022
        ):
            return False
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(COMPARE_CHUNK_BYTES, size - offset), offset)
            if not chunk:
                return False
            if isinstance(content, bytes):
                expected = content[offset : offset + len(chunk)]
            else:
                expected = os.pread(content, len(chunk), offset)
            if chunk != expected:
                log.warning("artifacts.reuse_refused", path=str(path), reason="other content")
                return False
            offset += len(chunk)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _ensure_dir(directory: Path) -> None:
    if not os.path.lexists(directory):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private_dir(directory)


def _open_temp(directory: Path) -> tuple[int, str]:
    """A new temp part in ``directory``, locked (``flock``) by this writer until it closes.

    The lock is how a store opening the directory tells a live writer's part from a dead
    one's (``sweep_stale_parts``). Should a sweep take the part in the instant between its
    creation and the lock, the part is gone from the directory: make another.
    """
    _ensure_dir(directory)
    while True:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            still_ours = os.lstat(tmp).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            still_ours = False
        if still_ours:
            break
        os.close(fd)
    os.fchmod(fd, 0o600)
    return fd, tmp


def sweep_stale_parts(directory: Path) -> int:
    """Remove the temp parts of dead writers from ``directory``; how many were removed.

    Every writer holds an exclusive ``flock`` on its part from creation until the part is
    published or removed, and the kernel drops it when the process ends, however it ends
    (``kill -9`` too). So a part whose lock can be taken has no live writer: it is removed.
    A part a live writer holds (in this process or another, on this machine) is left
    alone. Only regular files named ``.tmp-*.part`` are looked at; a directory that is not
    this user's private one is not touched.
    """
    try:
        check_private_dir(directory)
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    removed = 0
    for entry in entries:
        if not (entry.name.startswith(TEMP_PREFIX) and entry.name.endswith(TEMP_SUFFIX)):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer holds it
            if os.lstat(entry.path).st_ino == info.st_ino:
                os.unlink(entry.path)
                removed += 1
        except OSError:
            continue
        finally:
            os.close(fd)
    if removed:
        log.info("artifacts.stale_parts_removed", directory=str(directory), files=removed)
    return removed


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:WRITE_CHUNK_BYTES]) :]


def _sync_quietly(fd: int) -> None:
    """``fdatasync`` ahead of the real one; an error is left for that one to report."""
    with contextlib.suppress(OSError):
        os.fdatasync(fd)


def _rename_into_place(tmp: str, final: Path) -> None:
    # os.replace swaps the directory entry: a symlink planted at ``final`` is replaced, the
    # file it pointed to is never touched.
    os.replace(tmp, final)


@dataclass(slots=True, eq=False)
class _DirSync:
    """Group commit of one directory's renames: one ``fsync`` of the directory covers every
    rename made before it started.

    ``requested`` counts the renames waiting to be made durable, ``completed`` how many
    of them a finished fsync covers; ``running`` is set while one is under way. Writers
    wait in their worker thread, so a published file costs no hop back to the event loop.
    """

    changed: threading.Condition = field(default_factory=threading.Condition)
    requested: int = 0
    completed: int = 0
    running: bool = False


@dataclass(slots=True, eq=False)
class _OneShot:
    """One ``persist`` in progress, and what its worker thread learned on the way.

    ``content`` is bytes, or text known to be ASCII, so that ``len(content)`` is its size
    in bytes either way; the thread encodes it once and keeps the bytes for a retry.
    """

    call_id: str
    tool_name: str
    content: str | bytes
    suffix: str
    claim: anyio.Event
    """Set once this persist is over; others writing the same name wait for it."""
    name: str | None = None
    busy: anyio.Event | None = None
    """Another persist was writing the same name: wait for it, then look again."""
    reused: bool = False
    abandoned: bool = False
    """Its caller stopped waiting while a thread still worked: the cleanup settles it."""


def _create_part(directory: Path, attempt: _Attempt) -> None:
    """In a worker thread: a new temp part for ``attempt`` (kept on it even if its caller
    left meanwhile, so the cleanup finds it)."""
    attempt.fd, attempt.tmp = _open_temp(directory)


@dataclass(slots=True, eq=False)
class _Attempt:
    """One try at writing a one-shot job in one directory: what its threads made so far."""

    fd: int | None = None
    tmp: str | None = None
    published: Path | None = None
    abandoned: bool = False


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _default_fallback_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"toolbatch-fallback-{os.getuid()}"


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

    stream_class: type[ArtifactStream]
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
            Path(fallback_dir).absolute() if fallback_dir is not None else _default_fallback_dir()
        )
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self._used = 0
        self._inflight: dict[str, anyio.Event] = {}
        self._written: list[Path] = []
        self._dir_syncs: dict[Path, _DirSync] = {}
        try:
            _ensure_dir(self.root)
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
        sweep_stale_parts(self.fallback_dir)

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
        tool = safe_name_component(tool_name, MAX_TOOL_CHARS)
        return f"{tool}-{safe_name_component(call_id)}-{digest[:DIGEST_HEX_CHARS]}{suffix}"

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

    def _find_existing(self, name: str, size: int, content: bytes | int) -> Path | None:
        """An artifact already holding ``content`` (bytes, or an open file's) at ``name``.

        A file with the right name and size is reused only when its bytes are ``content``
        (compared in full, which is stronger than comparing digests), it is a regular file
        of this user that no one else can write, and its directory is a private one: a
        planted file with an artifact's name and size is never reused.
        """
        for directory in (self.root, self.fallback_dir):
            path = directory / name
            if _existing_size(path) == size and _holds(directory, path, size, content):
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
        if not text.isascii():  # ASCII's size is its length; anything else is encoded first
            if len(text) <= INLINE_ENCODE_CHARS:
                content = _encode(text)
            else:
                content = await _hop(_POOL, _encode, text)
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
            existing = await _hop(_POOL, self._find_identical, call_id, tool_name, content, suffix)
            if existing is None:
                raise
            log.debug("artifacts.reused", path=str(existing), bytes=size)
            return existing
        job = _OneShot(call_id, tool_name, content, suffix, anyio.Event())
        published = False
        try:
            path = await self._put_with_fallback(job)
            published = not job.reused
        finally:
            if not job.abandoned:  # an abandoned job is settled by its cleanup
                self._settle(job, released=0 if published else size)
        if published:
            self._written.append(path)
            log.debug("artifacts.persisted", path=str(path), bytes=size, call_id=call_id)
        else:
            log.debug("artifacts.reused", path=str(path), bytes=size)
        return path

    def _settle(self, job: _OneShot, *, released: int) -> None:
        """On the event loop: give back ``released`` reserved bytes and ``job``'s name."""
        self._release(released)
        if job.name is not None and self._inflight.get(job.name) is job.claim:
            del self._inflight[job.name]
        job.claim.set()

    async def _put_with_fallback(self, job: _OneShot) -> Path:
        directory = self.root
        primary_error: OSError | None = None
        while True:
            try:
                path = await self._put(directory, job)
            except OSError as error:
                if primary_error is not None:
                    raise ArtifactWriteError(
                        primary_dir=self.root,
                        primary_error=primary_error,
                        fallback_dir=self.fallback_dir,
                        fallback_error=error,
                    ) from error
                log.warning("artifacts.primary_failed", directory=str(self.root), error=str(error))
                primary_error = error
                directory = self.fallback_dir
                continue
            if path is not None:
                return path
            assert job.busy is not None
            await job.busy.wait()
            job.busy = None

    async def _put(self, directory: Path, job: _OneShot) -> Path | None:
        """Publish ``job`` in ``directory`` durably, or find it there.

        Returns the path (``job.reused`` tells a found one), or ``None`` when another
        persist is writing the same name (``job.busy``). The bytes go through
        ``aiofiles.open`` on the temp part; the data is fsynced before the rename, and a
        directory fsync that started after the rename has finished before this returns
        (``_sync_dir``), so the path is durable before anyone is given it. Cancelled, it
        returns at once and leaves the rest to ``_clean_up`` (see the module docstring).
        """
        tracker = _Tracker()
        attempt = _Attempt()
        loop = asyncio.get_running_loop()
        try:
            if isinstance(job.content, str):
                job.content = await _hop(tracker, str.encode, job.content, "ascii")
            data = job.content
            if job.name is not None:
                found = await _hop(tracker, self._claim, job, data)
                if found is not None or job.busy is not None:
                    return found

            await _hop(tracker, _create_part, directory, attempt)
            assert attempt.fd is not None
            file = await aiofiles.open(
                attempt.fd, "wb", buffering=0, closefd=False, executor=tracker
            )
            view = memoryview(data)
            while view:
                view = view[await file.write(view) :]
            return await _hop(tracker, self._finish, directory, job, attempt, data)
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                attempt.abandoned = job.abandoned = True
            tracker.after_idle(functools.partial(self._clean_up, job, attempt, loop))
            raise

    def _finish(
        self, directory: Path, job: _OneShot, attempt: _Attempt, data: bytes
    ) -> Path | None:
        """In a worker thread: name, claim, fsync, rename and publish a written temp part."""
        assert attempt.fd is not None
        assert attempt.tmp is not None
        fd = attempt.fd
        try:
            if _start_writeback is not None:
                _start_writeback(fd)
            if job.name is None:
                hasher = _digest_prefix(job.call_id)
                hasher.update(data)  # releases the GIL: other persists go on meanwhile
                job.name = self.artifact_name(
                    job.call_id, job.tool_name, hasher.hexdigest(), job.suffix
                )
                found = self._claim(job, data)
                if found is not None or job.busy is not None:
                    return found
            self.sync_file(fd)
            final = directory / job.name
            _rename_into_place(attempt.tmp, final)  # still open, so still locked
            attempt.tmp = None
        finally:
            attempt.fd = None
            os.close(fd)
            if attempt.tmp is not None:
                _unlink_quietly(attempt.tmp)
                attempt.tmp = None
        self._publish(final)
        attempt.published = final
        return final

    def _clean_up(self, job: _OneShot, attempt: _Attempt, loop: asyncio.AbstractEventLoop) -> None:
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
            _unlink_quietly(attempt.tmp)
            attempt.tmp = None
        if not attempt.abandoned:
            return
        removed = attempt.published
        if removed is not None and not job.reused:
            _unlink_quietly(os.fspath(removed))
        log.warning(
            "artifacts.persist_abandoned",
            call_id=job.call_id,
            tool=job.tool_name,
            size=len(job.content),
            removed=str(removed) if removed is not None else None,
        )
        _on_loop(loop, functools.partial(self._settle, job, released=len(job.content)))

    def _claim(self, job: _OneShot, data: bytes) -> Path | None:
        """Claim ``job.name``, unless another persist holds it (then ``job.busy`` is set);
        an artifact already holding ``data`` under that name is returned (reused)."""
        assert job.name is not None
        holder = self._inflight.setdefault(job.name, job.claim)
        if holder is not job.claim:
            job.busy = holder
            return None
        existing = self._find_existing(job.name, len(data), data)
        job.reused = existing is not None
        return existing

    def sync_file(self, fd: int) -> None:
        """Make a written file's data durable (``fsync``); runs in a worker thread."""
        os.fsync(fd)

    def sync_directory(self, directory: Path) -> None:
        """Make renames in ``directory`` durable (its ``fsync``); runs in a worker thread."""
        _fsync_dir(directory)

    def _publish(self, final: Path) -> None:
        """Make the rename to ``final`` durable (``_sync_dir``); a file whose rename cannot
        be made durable is removed, never handed out."""
        try:
            self._sync_dir(final.parent)
        except BaseException:
            _unlink_quietly(os.fspath(final))
            raise

    def _find_identical(
        self, call_id: str, tool_name: str, content: str | bytes, suffix: str
    ) -> Path | None:
        data = content.encode("ascii") if isinstance(content, str) else content
        hasher = _digest_prefix(call_id)
        hasher.update(data)
        name = self.artifact_name(call_id, tool_name, hasher.hexdigest(), suffix)
        return self._find_existing(name, len(data), data)

    def _sync_dir(self, directory: Path) -> None:
        """In a worker thread: return once a directory ``fsync`` that started after this
        call has finished.

        Concurrent writers share it (group commit): while one fsync runs, every rename that
        asks meanwhile waits for the next one, which covers them all. A failed fsync is
        raised to the writer that ran it; the others run their own.
        """
        state = self._dir_syncs.get(directory)
        if state is None:
            state = self._dir_syncs.setdefault(directory, _DirSync())
        with state.changed:
            state.requested += 1
            mine = state.requested
            while state.completed < mine:
                if state.running:
                    state.changed.wait()
                    continue
                covers = state.requested
                state.running = True
                state.changed.release()
                try:
                    self.sync_directory(directory)
                finally:
                    state.changed.acquire()
                    state.running = False
                    state.changed.notify_all()
                state.completed = max(state.completed, covers)

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


@dataclass(slots=True)
class _StreamFile:
    fd: int
    tmp: str
    directory: Path
    written: int = 0
    """Bytes written to it completely (a failed write leaves a torn rest past them)."""
    aio: Any = None
    """The ``aiofiles`` file the bytes go through (unbuffered, over ``fd``)."""


def _pieces(chunks: list[bytes]) -> list[bytes]:
    """``chunks`` as writes of at least ``PARALLEL_HASH_BYTES`` each (small runs joined,
    large chunks as they are): no executor hop for less than a mebibyte. ``chunks`` is
    emptied as it goes, so a joined run and its parts are not held at once."""
    pieces: list[bytes] = []
    run: list[bytes] = []
    size = 0
    chunks.reverse()
    while chunks:
        chunk = chunks.pop()
        if not chunk:
            continue
        run.append(chunk)
        size += len(chunk)
        if size >= PARALLEL_HASH_BYTES:
            pieces.append(run[0] if len(run) == 1 else b"".join(run))
            run, size = [], 0
    if run:
        pieces.append(run[0] if len(run) == 1 else b"".join(run))
    return pieces


def _remove_stream_file(file: _StreamFile) -> None:
    with contextlib.suppress(OSError):
        os.close(file.fd)
    _unlink_quietly(file.tmp)


@dataclass(slots=True, eq=False)
class ArtifactStream:
    """Appends output chunks to one artifact, written ``STREAM_FLUSH_BYTES`` at a time.

    It keeps at most the store's per-file cap (and what the per-store cap leaves); the rest
    is counted in ``bytes_dropped`` with the cap that stopped it in ``dropped_by``. Its
    waits on the store's threads stop when cancelled: the stream is then abandoned (its
    file removed once the thread using it returns).
    """

    store: ArtifactStore
    call_id: str
    tool_name: str
    suffix: str = ".txt"
    bytes_received: int = 0
    bytes_kept: int = 0
    bytes_dropped: int = 0
    dropped_by: Literal["file", "total"] | None = None
    committed: bool = False
    error: BaseException | None = None
    _buffer: list[bytes] = field(default_factory=list)
    _buffered: int = 0
    _file: _StreamFile | None = None
    _hasher: hashlib._Hash | None = None
    _reserved: int = 0
    _primary_error: OSError | None = None
    _tracker: _Tracker = field(default_factory=_Tracker)

    async def write(self, chunk: bytes) -> None:
        """Append ``chunk``; it is written once ``STREAM_FLUSH_BYTES`` have been buffered."""
        if self.committed:
            raise RuntimeError("write() after commit(): the artifact is already published")
        self.bytes_received += len(chunk)
        if self.error is not None or self.dropped_by is not None:
            self.bytes_dropped += len(chunk)
            return
        granted, cap = self.store._reserve_upto(len(chunk), self.bytes_kept)
        self._reserved += granted
        if cap is not None:
            self.dropped_by = cap
            self.bytes_dropped += len(chunk) - granted
            chunk = chunk[:granted]
        if chunk:
            self._buffer.append(chunk)
            self._buffered += len(chunk)
            self.bytes_kept += len(chunk)
        if self._buffered >= STREAM_FLUSH_BYTES:
            await self._flush()

    async def _flush(self, *, force: bool = False) -> None:
        if self.error is not None or not (self._buffer or force):
            return
        chunks = _pieces(self._buffer)  # the buffer is emptied as it is joined
        self._buffer = []
        size = self._buffered
        self._buffered = 0
        failure: BaseException | None = None
        try:
            if self._file is None:
                self._hasher = _digest_prefix(self.call_id)
                await _hop(self._tracker, self._open_file)
                await self._open()
            if size >= PARALLEL_HASH_BYTES:
                # sha256 and the write both release the GIL: run them side by side, and let
                # the disk take what earlier flushes wrote meanwhile (``_sync_quietly``).
                # A failed write is kept, not raised in the group: the hash must finish.
                failed: list[OSError] = []
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_hop, self._tracker, self._hash_chunks, chunks)
                    earlier = self._file
                    if earlier is not None and earlier.written:
                        tg.start_soon(_hop, self._tracker, _sync_quietly, earlier.fd)
                    await self._write_chunks(chunks, failed)
                if failed:
                    raise failed[0]
            elif chunks:
                await _hop(self._tracker, self._hash_chunks, chunks)
                failed = []
                await self._write_chunks(chunks, failed)
                if failed:
                    raise failed[0]
        except anyio.get_cancelled_exc_class():
            self._abandon("its writer was cancelled")
            raise
        except (OSError, ArtifactWriteError) as exc:
            failure = exc
        if failure is None:
            return
        if isinstance(failure, OSError) and self._in_primary():
            # The primary filled up (or broke) mid-stream: move what it holds to the
            # fallback directory and go on there. The chunks were hashed already.
            self._primary_error = failure
            try:
                await _hop(self._tracker, self._move_to_fallback, chunks)
                await self._open()
                return
            except anyio.get_cancelled_exc_class():
                self._abandon("its writer was cancelled")
                raise
            except OSError as fallback_error:
                failure = fallback_error
        self._fail(failure)

    async def _open(self) -> None:
        """Open ``self._file`` (made in a worker thread) for writing with ``aiofiles``."""
        file = self._file
        assert file is not None
        file.aio = await aiofiles.open(
            file.fd, "wb", buffering=0, closefd=False, executor=self._tracker
        )

    def _open_file(self) -> None:
        """In a worker thread: the stream's file (kept on the stream even if its caller
        left meanwhile, so the cleanup finds it)."""
        self._file = self._create_file()

    async def _write_chunks(self, chunks: list[bytes], failed: list[OSError]) -> None:
        file = self._file
        assert file is not None
        try:
            for piece in chunks:
                view = memoryview(piece)
                while view:
                    view = view[await file.aio.write(view) :]
        except OSError as exc:
            failed.append(exc)  # kept, not raised: a task group beside it must not cancel
            return
        file.written += sum(len(chunk) for chunk in chunks)

    async def sync_early(self) -> None:
        """Write what is buffered and let the disk take it now, before ``commit``.

        For a writer that knows little or nothing more will be kept (a cap was reached)
        and that commits later: the data is made durable while it does other work, so
        the fsync at commit, which is what makes the artifact durable, has little left
        to wait for. A failure here is not reported (the commit's fsync reports it).
        """
        await self._flush()
        file = self._file
        if file is not None and self.error is None:
            try:
                await _hop(self._tracker, _sync_quietly, file.fd)
            except anyio.get_cancelled_exc_class():
                self._abandon("its writer was cancelled")
                raise

    def _fail(self, exc: BaseException) -> None:
        log.warning(
            "artifacts.stream_failed", call_id=self.call_id, error=str(exc), kept=self.bytes_kept
        )
        self.error = exc
        self.bytes_dropped += self.bytes_kept
        self.bytes_kept = 0
        self._close_and_remove()

    def _abandon(self, why: str) -> None:
        """Its caller stopped waiting: drop the stream, its file removed in the background."""
        if self.error is None:
            log.warning(
                "artifacts.persist_abandoned", call_id=self.call_id, kept=self.bytes_kept, why=why
            )
            self.error = ArtifactWriteError(
                primary_dir=self.store.root,
                primary_error=OSError(errno.ECANCELED, f"abandoned: {why}"),
                fallback_dir=self.store.fallback_dir,
                fallback_error=None,
            )
            self.bytes_dropped += self.bytes_kept
            self.bytes_kept = 0
        self._close_and_remove()

    def _hash_chunks(self, chunks: list[bytes]) -> None:
        assert self._hasher is not None
        for chunk in chunks:
            self._hasher.update(chunk)

    @staticmethod
    def _write_to(fd: int, chunks: list[bytes]) -> None:
        pending = [memoryview(chunk) for chunk in chunks if chunk]
        while pending:
            written = os.writev(fd, pending[:_IOV_MAX])
            while written and pending:
                if written >= len(pending[0]):
                    written -= len(pending.pop(0))
                else:
                    pending[0] = pending[0][written:]
                    written = 0

    def _create_file(self) -> _StreamFile:
        try:
            fd, tmp = _open_temp(self.store.root)
            return _StreamFile(fd, tmp, self.store.root)
        except OSError as primary_error:
            self._primary_error = primary_error
            log.warning(
                "artifacts.primary_failed",
                directory=str(self.store.root),
                error=str(primary_error),
            )
        try:
            fd, tmp = _open_temp(self.store.fallback_dir)
        except OSError as fallback_error:
            raise ArtifactWriteError(
                primary_dir=self.store.root,
                primary_error=self._primary_error,
                fallback_dir=self.store.fallback_dir,
                fallback_error=fallback_error,
            ) from fallback_error
        return _StreamFile(fd, tmp, self.store.fallback_dir)

    def _in_primary(self) -> bool:
        store = self.store
        in_root = self._file is not None and self._file.directory == store.root
        return in_root and store.fallback_dir != store.root

    def _move_to_fallback(self, chunks: list[bytes]) -> None:
        """Copy the good prefix of the primary temp file to the fallback, then ``chunks``;
        the new file replaces the old one (closed and removed)."""
        assert self._file is not None
        old = self._file
        with contextlib.suppress(OSError):
            os.ftruncate(old.fd, old.written)  # frees the torn rest, if both share a disk
        fd, tmp = _open_temp(self.store.fallback_dir)
        try:
            offset = 0
            while offset < old.written:
                sent = os.sendfile(fd, old.fd, offset, old.written - offset)
                if sent == 0:
                    raise OSError(errno.EIO, "the primary temp file ended early", old.tmp)
                offset += sent
            self._write_to(fd, chunks)
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        written = old.written + sum(len(chunk) for chunk in chunks)
        self._file = _StreamFile(fd, tmp, self.store.fallback_dir, written)
        _remove_stream_file(old)
        log.warning(
            "artifacts.stream_moved_to_fallback",
            call_id=self.call_id,
            directory=str(self.store.fallback_dir),
            bytes=written,
        )

    def _close_and_remove(self) -> None:
        """Drop the file (once no thread of this stream uses it) and the reservation."""
        self._tracker.after_idle(self._remove_file)
        self.store._release(self._reserved)
        self._reserved = 0

    def _remove_file(self) -> None:
        """In a worker thread, once none of this stream's work is in flight."""
        file, self._file = self._file, None
        if file is not None:
            _remove_stream_file(file)

    @traced_commit
    async def commit(self) -> Path:
        """Publish what was kept and return its path (an identical artifact is reused).

        Cancelled while the store's thread works, it stops waiting at once; the artifact
        is then removed in the background (``artifacts.persist_abandoned``).

        Raises:
            ArtifactWriteError: the artifact could not be written (it carries the causes).
        """
        if self.committed:
            raise RuntimeError("commit() called twice")
        # Forced when nothing was flushed yet, so that empty output still gets its file.
        await self._flush(force=self._file is None)
        if self.error is not None:
            raise self._as_write_error(self.error)
        assert self._file is not None
        handle = self._file
        self._file = None
        outcome: list[tuple[Path, bool]] = []
        try:
            path, reused = await _hop(self._tracker, self._commit_sync, handle, outcome)
        except anyio.get_cancelled_exc_class():
            self._tracker.after_idle(functools.partial(self._remove_late, outcome))
            self._abandon("its commit was cancelled")
            raise
        except OSError as exc:
            self._fail(exc)
            raise self._as_write_error(exc) from exc
        self.committed = True
        if reused:
            self.store._release(self._reserved)
        else:
            self.store._written.append(path)
        self._reserved = 0
        log.debug("artifacts.streamed", path=str(path), kept=self.bytes_kept, reused=reused)
        return path

    def _remove_late(self, outcome: list[tuple[Path, bool]]) -> None:
        """In a worker thread: remove an artifact published after its commit was abandoned."""
        if outcome and not outcome[0][1]:
            _unlink_quietly(os.fspath(outcome[0][0]))
            log.warning("artifacts.late_artifact_removed", path=str(outcome[0][0]))

    def _as_write_error(self, exc: BaseException) -> ArtifactWriteError:
        if isinstance(exc, ArtifactWriteError):
            return exc
        if self._primary_error is not None:
            # The primary failed at creation and the fallback broke midway.
            return ArtifactWriteError(
                primary_dir=self.store.root,
                primary_error=self._primary_error,
                fallback_dir=self.store.fallback_dir,
                fallback_error=exc,
            )
        return ArtifactWriteError(
            primary_dir=self.store.root,
            primary_error=exc,
            fallback_dir=self.store.fallback_dir,
            fallback_error=None,
        )

    def _commit_sync(
        self, handle: _StreamFile, outcome: list[tuple[Path, bool]]
    ) -> tuple[Path, bool]:
        assert self._hasher is not None
        try:
            self.store.sync_file(handle.fd)
            name = self.store.artifact_name(
                self.call_id, self.tool_name, self._hasher.hexdigest(), self.suffix
            )
            existing = self.store._find_existing(name, self.bytes_kept, handle.fd)
            if existing is not None:
                _unlink_quietly(handle.tmp)
                outcome.append((existing, True))
                return existing, True
            final = handle.directory / name
            # Still open, so still locked: no sweep can take it.
            _rename_into_place(handle.tmp, final)
        except OSError:
            _unlink_quietly(handle.tmp)
            raise
        finally:
            os.close(handle.fd)
        self.store._publish(final)
        outcome.append((final, False))
        return final, False

    async def discard(self) -> None:
        """Drop everything written so far (also what leaving the block uncommitted does)."""
        self._buffer.clear()
        self._buffered = 0
        self._close_and_remove()


ArtifactStore.stream_class = ArtifactStream
