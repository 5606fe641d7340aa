"""Landlock through ctypes: the kernel's unprivileged sandbox, with nothing to install.

A ruleset names the accesses it *handles* (denied unless a rule allows them) and rules that
allow some of them beneath a directory (or on one file). ``landlock_restrict_self`` applies
it to the calling thread, irreversibly, and every process that thread forks from then on
inherits it, through every ``exec``. Accesses a ruleset does not handle stay allowed, so a
ruleset that handles only the write rights leaves reading and executing everywhere alone.

Rights by ABI (``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)``):
1 (Linux 5.13) the filesystem rights, 2 (5.19) ``REFER`` (cross-directory rename and link),
3 (6.2) ``TRUNCATE``, 4 (6.7) TCP ``bind`` and ``connect``, 5 (6.10) device ``ioctl``, 6 (6.12)
scoping: no signal to, and no abstract UNIX socket of, a process outside the domain.

A ruleset that handles no filesystem right leaves ``mount`` allowed, so a domain that only
scopes and handles TCP can confine ``bwrap``, which must mount to build its namespaces.

Only Linux has Landlock; everywhere else :func:`abi_version` is 0. The syscall numbers are the
same on every architecture since Linux 5.1 unified new syscall numbers (alpha excepted).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys
from typing import Final

__all__ = [
    "ACCESS_FS_TRUNCATE",
    "ACCESS_FS_WRITE_FILE",
    "ACCESS_NET_BIND_TCP",
    "ACCESS_NET_CONNECT_TCP",
    "FILE_RIGHTS",
    "FS_WRITE_RIGHTS",
    "NET_ABI",
    "NET_RIGHTS",
    "SCOPE_ABI",
    "SCOPE_ABSTRACT_UNIX_SOCKET",
    "SCOPE_SIGNAL",
    "abi_version",
    "allow_beneath",
    "create_ruleset",
    "fs_rights",
    "restrict_current_thread",
    "right_names",
]

ACCESS_FS_EXECUTE: Final = 1 << 0
ACCESS_FS_WRITE_FILE: Final = 1 << 1
ACCESS_FS_READ_FILE: Final = 1 << 2
ACCESS_FS_READ_DIR: Final = 1 << 3
ACCESS_FS_REMOVE_DIR: Final = 1 << 4
ACCESS_FS_REMOVE_FILE: Final = 1 << 5
ACCESS_FS_MAKE_CHAR: Final = 1 << 6
ACCESS_FS_MAKE_DIR: Final = 1 << 7
ACCESS_FS_MAKE_REG: Final = 1 << 8
ACCESS_FS_MAKE_SOCK: Final = 1 << 9
ACCESS_FS_MAKE_FIFO: Final = 1 << 10
ACCESS_FS_MAKE_BLOCK: Final = 1 << 11
ACCESS_FS_MAKE_SYM: Final = 1 << 12
ACCESS_FS_REFER: Final = 1 << 13
ACCESS_FS_TRUNCATE: Final = 1 << 14
ACCESS_NET_BIND_TCP: Final = 1 << 0
ACCESS_NET_CONNECT_TCP: Final = 1 << 1

FS_WRITE_RIGHTS: Final = (
    ACCESS_FS_WRITE_FILE
    | ACCESS_FS_REMOVE_DIR
    | ACCESS_FS_REMOVE_FILE
    | ACCESS_FS_MAKE_CHAR
    | ACCESS_FS_MAKE_DIR
    | ACCESS_FS_MAKE_REG
    | ACCESS_FS_MAKE_SOCK
    | ACCESS_FS_MAKE_FIFO
    | ACCESS_FS_MAKE_BLOCK
    | ACCESS_FS_MAKE_SYM
    | ACCESS_FS_REFER
    | ACCESS_FS_TRUNCATE
)
"""Every right that changes the filesystem: what a write sandbox handles."""
FILE_RIGHTS: Final = (
    ACCESS_FS_EXECUTE | ACCESS_FS_WRITE_FILE | ACCESS_FS_READ_FILE | (ACCESS_FS_TRUNCATE)
)
"""The rights a rule on a single file (not a directory) may grant."""
NET_RIGHTS: Final = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP
NET_ABI: Final = 4
"""The first ABI that handles TCP bind and connect."""
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0
SCOPE_SIGNAL: Final = 1 << 1
SCOPE_ABI: Final = 6
"""The first ABI that scopes signals and abstract UNIX sockets to the domain."""

_FS_RIGHTS_BY_ABI: Final = {
    1: (1 << 13) - 1,
    2: (1 << 14) - 1,
    3: (1 << 15) - 1,
}
_NAMES: Final = {
    ACCESS_FS_WRITE_FILE: "write_file",
    ACCESS_FS_REMOVE_DIR: "remove_dir",
    ACCESS_FS_REMOVE_FILE: "remove_file",
    ACCESS_FS_MAKE_CHAR: "make_char",
    ACCESS_FS_MAKE_DIR: "make_dir",
    ACCESS_FS_MAKE_REG: "make_reg",
    ACCESS_FS_MAKE_SOCK: "make_sock",
    ACCESS_FS_MAKE_FIFO: "make_fifo",
    ACCESS_FS_MAKE_BLOCK: "make_block",
    ACCESS_FS_MAKE_SYM: "make_sym",
    ACCESS_FS_REFER: "refer",
    ACCESS_FS_TRUNCATE: "truncate",
}

_CREATE_RULESET_VERSION: Final = 1 << 0
_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
_SYSCALL_BASE: Final = 554 if platform.machine().startswith("alpha") else 444
_SYS_CREATE_RULESET: Final = _SYSCALL_BASE
_SYS_ADD_RULE: Final = _SYSCALL_BASE + 1
_SYS_RESTRICT_SELF: Final = _SYSCALL_BASE + 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is __attribute__((packed))
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


_LIBC: Final = _libc()


def _syscall(number: int, *args: object) -> int:
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "Landlock needs Linux")
    # Variadic: pass every integer as a full C long so no register keeps stale upper bits.
    result = int(_LIBC.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is missing or disabled.

    ``ENOSYS``: the kernel was built without Landlock; ``EOPNOTSUPP``: it is built in but
    not enabled at boot (``lsm=...,landlock``).
    """
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_long(0), ctypes.c_long(1))
    except OSError:
        return 0


def fs_rights(abi: int) -> int:
    """Every filesystem right ABI ``abi`` knows (0 for no Landlock)."""
    if abi <= 0:
        return 0
    return _FS_RIGHTS_BY_ABI[min(abi, 3)]


def right_names(rights: int) -> list[str]:
    """The names of the write rights in ``rights``, e.g. ``["refer", "truncate"]``."""
    return [name for bit, name in _NAMES.items() if rights & bit]


def create_ruleset(*, handled_fs: int, handled_net: int = 0, scoped: int = 0) -> int:
    """A new ruleset handling these rights and scopes; returns its file descriptor (close it).

    Raises:
        OSError: Landlock refused (``EINVAL`` for a right this ABI does not know).
    """
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    # The size names the fields an older kernel must understand: only those in use.
    if scoped:
        size = ctypes.sizeof(attr)
    elif handled_net:
        size = 2 * ctypes.sizeof(ctypes.c_uint64)
    else:
        size = ctypes.sizeof(ctypes.c_uint64)
    fd = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_long(size), ctypes.c_long(0))
    os.set_inheritable(fd, False)
    return fd


def allow_beneath(ruleset_fd: int, path: str | os.PathLike[str], rights: int) -> None:
    """Allow ``rights`` beneath directory ``path`` (or on file ``path``) in the ruleset.

    The rule holds the inode ``path`` resolves to now (symlinks followed), so renaming or
    re-linking the path later neither moves nor widens it.

    Raises:
        OSError: ``path`` cannot be opened, or the rights do not apply to it.
    """
    parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        attr = _PathBeneathAttr(rights, parent)
        _syscall(
            _SYS_ADD_RULE,
            ctypes.c_long(ruleset_fd),
            ctypes.c_long(_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_long(0),
        )
    finally:
        os.close(parent)


def restrict_current_thread(ruleset_fd: int) -> None:
    """Confine the calling thread (and all it forks later) to the ruleset, irreversibly.

    Sets ``no_new_privs`` first, as Landlock requires of an unprivileged thread; it also
    means setuid programs run by the confined thread do not gain privileges.

    Raises:
        OSError: the kernel refused (``E2BIG``: 16 rulesets are already stacked).
    """
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "Landlock needs Linux")
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    if _LIBC.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), one, zero, zero, zero) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    _syscall(_SYS_RESTRICT_SELF, ctypes.c_long(ruleset_fd), ctypes.c_long(0))
