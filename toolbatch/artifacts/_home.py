"""Where complete tool output lives by default, and for how long.

Every scheduler session without an ``artifacts_dir`` (or a ``store``) keeps its artifacts
in its own folder of the per-user state directory::

    $TOOLBATCH_STATE_DIR                  (when set; the test suite points it at a temp dir)
    or $XDG_STATE_HOME/toolbatch          (when XDG_STATE_HOME is an absolute path)
    or ~/.local/state/toolbatch
        sessions/<session id>/            0700, one per scheduler session
            .lock                         held (flock, shared) while the session is open
            run_shell_command-...txt      the session's artifacts (0600)

The state directory and ``sessions/`` are created 0700 and must belong to the user (a
directory someone else owns is refused; one that is too open is narrowed to 0700).

Lifecycle: a session folder is kept while its session is open (its lock is held, so no
sweep can touch it, however long it runs) and for ``SESSION_MAX_AGE_S`` (7 days) after its
last use: the later of its last write and the moment the session closed. A session that
wrote nothing leaves nothing: its empty folder is removed as it closes. Each new session
first removes the folders that are older than that and not locked; ``toolbatch artifacts
list`` shows the sessions and ``toolbatch artifacts clean`` frees them earlier. So a model
can read the files it was pointed at for as long as its session lives, and a week after.

When the state directory cannot be used (a read-only home, a directory owned by someone
else), the session falls back to a new private directory under the system temp dir, as
toolbatch did before, and says so in the log.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from toolbatch.artifacts._store import safe_name_component
from toolbatch.errors import ConfigError

__all__ = [
    "SESSION_MAX_AGE_S",
    "STATE_DIR_ENV",
    "ArtifactSession",
    "artifact_session",
    "list_sessions",
    "remove_sessions",
    "sessions_dir",
    "state_dir",
]

log = structlog.get_logger("toolbatch.artifacts")

STATE_DIR_ENV: Final = "TOOLBATCH_STATE_DIR"
"""Overrides the per-user state directory (tests, containers, a shared disk)."""
SESSION_MAX_AGE_S: Final = 7 * 24 * 3600.0
"""A closed session's folder is removed this long after its last use."""
LOCK_NAME: Final = ".lock"
"""The lock file inside a session folder; a live session holds a shared ``flock`` on it."""
SESSIONS_DIR_NAME: Final = "sessions"
_PRIVATE_DIR_MODE: Final = 0o700
_LOCK_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class ArtifactSession:
    """One session folder, as ``toolbatch artifacts list`` shows it.

    Attributes:
        id: the folder's name (the session id made safe for a file name).
        path: the folder.
        files: how many files it holds (the lock file not counted).
        size_bytes: their total size.
        last_used: when the session last wrote or closed (seconds since the epoch).
        live: whether a session holds it open right now (it is never removed then).
    """

    id: str
    path: Path
    files: int
    size_bytes: int
    last_used: float
    live: bool


def state_dir() -> Path:
    """The per-user state directory (not created): see the module docstring."""
    override = os.environ.get(STATE_DIR_ENV, "")
    if override:
        return Path(override).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec says a relative value is to be ignored
        return Path(xdg) / "toolbatch"
    return Path.home() / ".local" / "state" / "toolbatch"


def sessions_dir(*, create: bool = True) -> Path:
    """``<state dir>/sessions``, created 0700 and checked to be the user's own.

    Raises:
        ConfigError: the state directory or ``sessions/`` belongs to another user, or is
            not a directory.
        OSError: it could not be created.
    """
    state = state_dir()
    sessions = state / SESSIONS_DIR_NAME
    for directory in (state, sessions):
        if create:
            directory.mkdir(mode=_PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        elif not directory.exists():
            return sessions
        _check_private_dir(directory)
    return sessions


def _check_private_dir(directory: Path) -> None:
    info = os.stat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(
            f"the toolbatch state path {str(directory)!r} is not a directory; remove it or "
            f"set {STATE_DIR_ENV} to a directory of your own"
        )
    if info.st_uid != os.getuid():
        raise ConfigError(
            f"the toolbatch state directory {str(directory)!r} belongs to uid {info.st_uid}, "
            f"not to you (uid {os.getuid()}); remove it or set {STATE_DIR_ENV} to a "
            f"directory of your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(directory, _PRIVATE_DIR_MODE)


def new_session_id() -> str:
    """A fresh id for a session that has none: its start time, then random hex."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def artifact_session(session_id: str | None = None) -> Iterator[Path]:
    """This session's artifact folder, held open (locked) for the duration of the block.

    Expired, unlocked sessions are removed first. The folder is kept after the block; its
    age counts from the block's end (or its last write, if later).

    Args:
        session_id: the scheduler's session id (made safe for a file name); ``None`` makes
            a new one.

    Yields:
        The folder (0700). When the state directory cannot be used, a new private
        directory under the system temp dir instead (logged as
        ``artifacts.home_unavailable``).
    """
    name = safe_name_component(session_id) if session_id else new_session_id()
    try:
        sessions = sessions_dir()
        folder = sessions / name
        fd = _lock_live(folder)  # before the sweep, which then passes this folder by
    except (ConfigError, OSError) as exc:
        fallback = Path(tempfile.mkdtemp(prefix="toolbatch-artifacts-"))
        log.warning("artifacts.home_unavailable", error=str(exc), fallback=str(fallback))
        fd = None
        folder = fallback
    else:
        _sweep(sessions, now=time.time())
    try:
        yield folder
    finally:
        if fd is not None:
            _release(folder, fd)


def _release(folder: Path, fd: int) -> None:
    """Close the session: an empty folder is removed, a used one dated now; then unlock."""
    try:
        if os.listdir(folder) == [LOCK_NAME]:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no other holder
                shutil.rmtree(folder)
        else:
            os.utime(folder)  # the age of a closed session counts from now
    except OSError as exc:
        log.warning("artifacts.session_close_failed", folder=str(folder), error=str(exc))
    finally:
        os.close(fd)  # releases the lock


def _lock_live(folder: Path) -> int:
    """Create ``folder`` if needed and hold a shared lock on its lock file; the fd."""
    while True:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=_PRIVATE_DIR_MODE)
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            raise ConfigError(
                f"the session folder {str(folder)!r} is not a directory (a symlink?); remove it"
            )
        try:
            fd = os.open(folder / LOCK_NAME, _LOCK_FLAGS, 0o600)
        except FileNotFoundError:
            continue  # swept between mkdir and open: make it again
        try:
            # Blocks only while a sweep that already holds the folder removes it.
            fcntl.flock(fd, fcntl.LOCK_SH)
            if _same_file(fd, folder / LOCK_NAME):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the sweep removed the folder we waited on: make it again


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _session_folders(sessions: Path) -> Iterator[os.DirEntry[str]]:
    try:
        entries = list(os.scandir(sessions))
    except FileNotFoundError:
        return
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            yield entry


def _last_used(folder: os.DirEntry[str] | Path) -> float:
    """The latest mtime of the folder and the files directly in it."""
    latest = os.lstat(folder).st_mtime
    with os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                latest = max(latest, entry.stat(follow_symlinks=False).st_mtime)
    return latest


def _usage(folder: str) -> tuple[int, int]:
    """Files (the lock file aside) and bytes under ``folder``, symlinks not followed."""
    files = size = 0
    for directory, _, names in os.walk(folder):
        for name in names:
            if directory == folder and name == LOCK_NAME:
                continue
            with contextlib.suppress(FileNotFoundError):
                size += os.lstat(os.path.join(directory, name)).st_size
                files += 1
    return files, size


def _is_live(folder: str) -> bool:
    """Whether a session holds ``folder``'s lock (probed without creating anything)."""
    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lock file (or not a regular one): nobody can hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _remove_if_idle(folder: str) -> bool:
    """Remove ``folder`` unless a live session holds it; whether it was removed."""
    # The lock file is created if missing, so that a session opening this folder right
    # now waits for the removal and then makes the folder again.
    fd = os.open(os.path.join(folder, LOCK_NAME), _LOCK_FLAGS, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        shutil.rmtree(folder)
        return True
    finally:
        os.close(fd)


def _sweep(sessions: Path, *, now: float, max_age_s: float = SESSION_MAX_AGE_S) -> None:
    """Remove the session folders unused for ``max_age_s`` and not held by a session."""
    for entry in _session_folders(sessions):
        try:
            age = now - _last_used(entry)
            if age >= max_age_s and _remove_if_idle(entry.path):
                log.info("artifacts.session_expired", session=entry.name, age_s=round(age))
        except OSError as exc:  # one bad folder never stops a session from opening
            log.warning("artifacts.sweep_failed", session=entry.name, error=str(exc))


def list_sessions() -> list[ArtifactSession]:
    """Every session folder of the state directory, oldest use first.

    Raises:
        ConfigError: the state directory belongs to another user.
    """
    sessions = sessions_dir(create=False)
    found = []
    for entry in _session_folders(sessions):
        try:
            files, size = _usage(entry.path)
            found.append(
                ArtifactSession(
                    id=entry.name,
                    path=Path(entry.path),
                    files=files,
                    size_bytes=size,
                    last_used=_last_used(entry),
                    live=_is_live(entry.path),
                )
            )
        except FileNotFoundError:
            continue  # removed while we looked
    return sorted(found, key=lambda session: session.last_used)


def remove_sessions(*, older_than_s: float | None) -> tuple[list[ArtifactSession], list[str]]:
    """Remove the session folders unused for ``older_than_s`` seconds (``None``: all).

    A live session is never removed, whatever its age.

    Returns:
        The sessions removed (as they were) and the ids of live ones that were kept.

    Raises:
        ConfigError: the state directory belongs to another user, or the age is negative.
    """
    if older_than_s is not None and not older_than_s >= 0:
        raise ConfigError(f"the age must be a number of seconds >= 0, got {older_than_s!r}")
    now = time.time()
    removed: list[ArtifactSession] = []
    kept_live: list[str] = []
    for session in list_sessions():
        if older_than_s is not None and now - session.last_used < older_than_s:
            continue
        try:
            if _remove_if_idle(str(session.path)):
                removed.append(session)
            else:
                kept_live.append(session.id)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return removed, kept_live
