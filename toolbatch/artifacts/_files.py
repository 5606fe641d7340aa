"""The store's file operations: private directories, temp parts, fsyncs, reuse checks.

Everything here blocks and runs in the store's worker threads. A writer's temp part
(``.tmp-*.part``) is created in a private directory (``check_private_dir``) and held under
an exclusive ``flock`` until it is published or removed, so that a store opening the
directory removes the parts of dead writers only (``sweep_stale_parts``).

A one-shot write's part has no name at all where Linux allows (``open_unnamed``: an
``O_TMPFILE`` file, published by ``link_unnamed`` through ``/proc/self/fd``). Nobody can
open, replace or sweep it, a writer that dies leaves nothing behind, and a name already
taken shows up as ``EEXIST`` when it is published. So it needs neither the named part's
lock and its check nor a lookup of its name in its directory (and the fallback directory is
looked in only for names it may hold: ``ArtifactStore._maybe_in_fallback``): 8 system calls
a file where a named part makes 12 (issue 33).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import random
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

import structlog

from toolbatch.errors import UnsafeDirectory

__all__ = [
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "check_private_dir",
    "default_fallback_dir",
    "ensure_dir",
    "existing_size",
    "fsync_dir",
    "holds",
    "link_unnamed",
    "name_unnamed",
    "open_temp",
    "open_unnamed",
    "rename_into_place",
    "start_writeback",
    "sweep_stale_parts",
    "sync_quietly",
    "unlink_quietly",
]

log = structlog.get_logger("toolbatch.artifacts")

COMPARE_CHUNK_BYTES: Final = 1 * 2**20
"""A file considered for reuse is compared with the new content this much at a time."""
TEMP_PREFIX: Final = ".tmp-"
TEMP_SUFFIX: Final = ".part"

_SYNC_FILE_RANGE_WRITE: Final = 2
_CREATE_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TMPFILE: Final = getattr(os, "O_TMPFILE", 0)
_UNNAMED_FLAGS: Final = _TMPFILE | os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW
_CAN_LINK_UNNAMED: Final = bool(_TMPFILE) and os.path.isdir("/proc/self/fd")
"""An unnamed part can be given a name later only through ``/proc`` (``linkat`` with
``AT_EMPTY_PATH`` needs ``CAP_DAC_READ_SEARCH``); without it the parts are named."""
_NO_UNNAMED: set[str] = set()
"""Directories whose file system refused an ``O_TMPFILE`` part: named parts there."""
_NAMES: Final = random.Random()
"""Temp part names (unpredictability is not needed: ``O_EXCL`` in a private directory)."""


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


start_writeback: Final = _load_start_writeback()


def existing_size(path: Path) -> int | None:
    """The size of a regular file at ``path`` (symlinks and others count as absent)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


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


def holds(directory: Path, path: Path, size: int, content: bytes | memoryview | int) -> bool:
    """Whether ``path`` is a private regular file of this user whose bytes are ``content``
    (bytes or a view of them, or the first ``size`` bytes of an open file descriptor)."""
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
            if isinstance(content, int):
                expected: bytes | memoryview = os.pread(content, len(chunk), offset)
            else:
                expected = content[offset : offset + len(chunk)]
            if chunk != expected:
                log.warning("artifacts.reuse_refused", path=str(path), reason="other content")
                return False
            offset += len(chunk)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def ensure_dir(directory: Path) -> None:
    """Create ``directory`` (0700) if missing; raise unless it is a private one."""
    try:
        check_private_dir(directory)
    except FileNotFoundError:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_private_dir(directory)


def open_temp(directory: Path) -> tuple[int, str]:
    """A new temp part in ``directory``, locked (``flock``) by this writer until it closes.

    The lock is how a store opening the directory tells a live writer's part from a dead
    one's (``sweep_stale_parts``). Should a sweep take the part in the instant between its
    creation and the lock, the part is gone from the directory: make another.
    """
    ensure_dir(directory)
    while True:
        # As mkstemp does, minus its Python: every system call here is a GIL round trip
        # for a worker thread, and with eight writers each one may wait for it.
        tmp = _temp_name(directory)
        try:
            fd = os.open(tmp, _CREATE_FLAGS, 0o600)
        except FileExistsError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        info = os.fstat(fd)
        try:
            still_ours = os.lstat(tmp).st_ino == info.st_ino
        except FileNotFoundError:
            still_ours = False
        if still_ours:
            break
        os.close(fd)
    _keep_private(fd, info.st_mode)
    return fd, tmp


def _temp_name(directory: Path) -> str:
    """A fresh temp part's path in ``directory`` (``.tmp-<16 hex digits>.part``)."""
    return os.path.join(directory, f"{TEMP_PREFIX}{_NAMES.getrandbits(64):016x}{TEMP_SUFFIX}")


def _keep_private(fd: int, mode: int) -> None:
    """Make a new part 0600 again where the umask took bits the user needs to read it."""
    if stat.S_IMODE(mode) != 0o600:
        os.fchmod(fd, 0o600)


def open_unnamed(directory: Path) -> int | None:
    """A new unnamed part (``O_TMPFILE``, mode 0600) in ``directory``, or ``None`` where
    the kernel, the file system or a missing ``/proc`` allows none (make a named part with
    ``open_temp`` then). It vanishes when closed unless ``link_unnamed`` named it."""
    key = os.fspath(directory)
    if not _CAN_LINK_UNNAMED or key in _NO_UNNAMED:
        return None
    ensure_dir(directory)
    try:
        fd = os.open(directory, _UNNAMED_FLAGS, 0o600)
    except OSError as exc:
        # EOPNOTSUPP: a file system without it; EISDIR: a kernel without O_TMPFILE.
        if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
        _NO_UNNAMED.add(key)
        return None
    _keep_private(fd, os.fstat(fd).st_mode)
    return fd


def link_unnamed(fd: int, final: Path) -> bool:
    """Give the unnamed part ``fd`` the name ``final``; ``False`` if that name is taken.

    A symlink or anything else already at ``final`` is left as it is, never followed:
    the caller decides whether it is the same artifact (reuse) or must be replaced
    (``name_unnamed``, then ``rename_into_place``).
    """
    # os.link calls linkat(2) with AT_SYMLINK_FOLLOW only when given a dir fd; an absolute
    # source ignores it. Following /proc/self/fd/N names the open file itself.
    try:
        os.link(f"/proc/self/fd/{fd}", final, src_dir_fd=fd, follow_symlinks=True)
    except FileExistsError:
        return False
    return True


def name_unnamed(fd: int, directory: Path) -> str:
    """Give the unnamed part ``fd`` a temp part's name in ``directory`` (locked first, so a
    sweep leaves it alone), to be renamed over a file that holds its final name."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    while True:
        tmp = _temp_name(directory)
        if link_unnamed(fd, Path(tmp)):
            return tmp


def sweep_stale_parts(directory: Path, entries: list[os.DirEntry[str]] | None = None) -> int:
    """Remove the temp parts of dead writers from ``directory``; how many were removed.
    ``entries`` is its listing, when the caller made one (else it is listed here).

    Every writer holds an exclusive ``flock`` on its part from creation until the part is
    published or removed, and the kernel drops it when the process ends, however it ends
    (``kill -9`` too). So a part whose lock can be taken has no live writer: it is removed.
    A part a live writer holds (in this process or another, on this machine) is left
    alone. Only regular files named ``.tmp-*.part`` are looked at; a directory that is not
    this user's private one is not touched.
    """
    try:
        check_private_dir(directory)
        if entries is None:
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


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_quietly(fd: int) -> None:
    """``fdatasync`` ahead of the real one; an error is left for that one to report."""
    with contextlib.suppress(OSError):
        os.fdatasync(fd)


def rename_into_place(tmp: str, final: Path) -> None:
    # os.replace swaps the directory entry: a symlink planted at ``final`` is replaced, the
    # file it pointed to is never touched.
    os.replace(tmp, final)


def unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def default_fallback_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"toolbatch-fallback-{os.getuid()}"
