"""Files toolbatch writes for the user (a transcript, a dual-output sidecar).

Such a file often sits where others can act: a transcript in the workspace, which the
model's commands can write, or a sidecar in the shared temp dir. So it is opened once, and
never through a symlink: the last component is opened ``O_NOFOLLOW`` relative to a
descriptor of its directory (opened once, so the name cannot move between the check and the
open); it must be a regular file, and it is made 0600 (which only its owner can do). Every
write goes through that one descriptor, and before each the path is checked to still
name the same file (``st_dev``/``st_ino``): a file replaced underneath (by a symlink to
something else, or another file) is reported, and nothing is written anywhere.

The directories leading to the file are the user's choice and are followed as given when
the file is opened; after that only the descriptor is used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import weakref
from pathlib import Path

__all__ = ["ReplacedFileError", "UserFile"]


class ReplacedFileError(OSError):
    """The path no longer names the file that was opened (replaced, moved or removed)."""


def _refused(path: Path, why: str, code: int) -> OSError:
    return OSError(code, why, str(path))


class UserFile:
    """One user-facing file, opened once without following symlinks, mode 0600.

    Use :meth:`open`; write through :attr:`fd` after :meth:`check`; :meth:`close` when done
    (a file never closed is closed when the object is collected).
    """

    def __init__(self, fd: int, path: Path, identity: tuple[int, int]) -> None:
        self.fd = fd
        self.path = path
        self._identity = identity
        self._close = weakref.finalize(self, os.close, fd)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, append: bool, truncate: bool = False
    ) -> UserFile:
        """Open (or create) ``path`` for writing.

        Args:
            append: every write goes to the end (``O_APPEND``).
            truncate: empty an existing file (after it passed the checks).

        Raises:
            OSError: the file could not be opened, is a symlink (``ELOOP``), is not a
                regular file, or belongs to someone else; ``strerror`` says which and the fix.
        """
        target = Path(path).absolute()
        parent = target.parent
        if not os.path.lexists(parent):
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        if append:
            flags |= os.O_APPEND
        try:
            fd = os.open(target.name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refused(
                    target,
                    "it is a symlink, and toolbatch does not write through symlinks (remove "
                    "it, or choose another path)",
                    errno.ELOOP,
                ) from None
            raise
        finally:
            os.close(dir_fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise _refused(
                    target, "it is not a regular file (choose a file path)", errno.EINVAL
                )
            if info.st_uid != os.geteuid():
                raise _refused(
                    target,
                    f"it belongs to uid {info.st_uid}, not to this user (remove it, or "
                    f"choose another path)",
                    errno.EPERM,
                )
            os.fchmod(fd, 0o600)
            os.set_blocking(fd, True)
            if truncate:
                os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, target, (info.st_dev, info.st_ino))

    def check(self) -> None:
        """Raise ``ReplacedFileError`` unless the path still names the opened file."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            now = "removed"
        else:
            if (info.st_dev, info.st_ino) == self._identity:
                return
            now = "a symlink" if stat.S_ISLNK(info.st_mode) else "another file"
        raise ReplacedFileError(
            errno.ESTALE,
            f"it was replaced since toolbatch opened it (it is now {now}); nothing was "
            f"written to it or elsewhere (restore the file, or choose another path)",
            str(self.path),
        )

    @property
    def closed(self) -> bool:
        return not self._close.alive

    def close(self) -> None:
        """Close the descriptor (again is a no-op)."""
        with contextlib.suppress(OSError):
            self._close()
