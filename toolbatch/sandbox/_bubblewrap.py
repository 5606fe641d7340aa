"""The namespaces layer: the session's commands run under ``bwrap`` (bubblewrap).

One ``bwrap`` per session (``toolbatch.sandbox._spawner``), started at its first command and
running a spawner that starts every command of the session; a ``bwrap`` per command where
the spawner cannot start. What the commands get (``bwrap`` 0.4 or newer; Claude Code and
Flatpak use it the same way):

* a PID namespace of the session's own: they see, signal and read the ``/proc/<pid>/environ``
  of no host process (only their session's: the same trust domain; the spawner and the
  supervisors carry only the filtered environment);
* IPC and mount namespaces of the session's own: the whole filesystem read-only
  (``--ro-bind / /``), the writable roots of the mode bound writable again, the protected
  paths under them bound read-only over that (those that exist when the spawner starts: one
  that appears or is replaced later gets a new spawner), a fresh ``/proc`` and a minimal
  ``/dev``;
* with the network off, an empty network namespace (only a loopback of its own): no
  protocol reaches anything outside (TCP, UDP, MPTCP, abstract UNIX sockets), and a socket it
  listens on is reachable from nowhere; and a seccomp filter (:func:`unix_socket_filter`)
  refuses ``socket(AF_UNIX, ...)``, because a UNIX socket file is reachable through a
  read-only mount (``/var/run/docker.sock``, an ssh-agent's, D-Bus's); inherited sockets,
  ``socketpair``, ``sendmsg`` and ``recvmsg`` (the spawner's channels) stay allowed;
* ``--cap-drop ALL`` (a host running as root would hand it every capability, enough to
  unmount its read-only binds), ``--die-with-parent`` and ``--new-session`` (no terminal to
  inject input into). ``bwrap`` also sets ``no_new_privs``.

The process the host starts is the outer ``bwrap``, registered with the host reaper: killing
it (what the reaper does on ``kill -9`` of the host) kills its init, which takes every process
of the namespace with it, ``setsid`` escapees included. The host stops one command by its
supervisor (``toolbatch.sandbox._spawner``), or, per command, by the processes beneath the
init (``toolbatch.sandbox._process``).

A ``bwrap`` per command costs about 3.5 ms on the 2-core development machine; a command
through the session's spawner, one ``posix_spawn`` and a few datagrams (``make bench``).
"""

from __future__ import annotations

import os
import platform
import shutil
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "BWRAP_INSTALL_HINT",
    "PROTECTED_NAMES",
    "find_bubblewrap",
    "namespace_argv",
    "read_only_binds",
    "seccomp_pipe",
    "unix_socket_filter",
]

BWRAP_INSTALL_HINT: Final = "install it with apt-get install bubblewrap (or dnf, pacman, apk)"
PROTECTED_NAMES: Final = (".git", ".claude", ".mcp.json", ".vscode", ".codex", ".toolbatch")
"""Read-only beneath every workspace root: what the host (or git, or an editor) runs later."""
PROBE_TIMEOUT_S: Final = 10.0


def find_bubblewrap(executable: str | None = None) -> tuple[str | None, str | None]:
    """The ``bwrap`` to use and ``None``, or ``None`` and why namespaces are unavailable.

    Runs ``bwrap`` once with the namespaces a command gets (about 3 ms): a binary that is
    installed but cannot create them (user namespaces disabled, a container without
    ``CAP_SYS_ADMIN``) is reported here, once, rather than on every command.
    """
    found = executable if executable is not None else shutil.which("bwrap")
    if found is None:
        return None, f"bubblewrap (bwrap) is not installed; {BWRAP_INSTALL_HINT}"
    argv = [found, *_NAMESPACES, "--unshare-net", "--ro-bind", "/", "/", "--", "true"]
    try:
        probe = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap ({found}) could not run: {exc}"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip() or f"exit {probe.returncode}"
        return None, (
            f"bubblewrap ({found}) cannot create namespaces here ({said}); enable unprivileged "
            f"user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run where they are"
        )
    return found, None


_PROC_COVERED: Final = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
_NAMESPACES: Final = (
    # A host running as root would otherwise hand bwrap's child every capability, and with
    # CAP_SYS_ADMIN a command can unmount what keeps a protected path read-only.
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
)


def namespace_argv(
    bwrap: str,
    *,
    writable: Sequence[Path],
    network: bool,
    private_tmp: Path | None,
    visible: Sequence[Path] = (),
) -> tuple[str, ...]:
    """The ``bwrap`` options that come before a command's protected paths (then ``--``).

    Mounts apply in order: everything read-only, the private temp dir on ``/tmp``, the
    ``visible`` directories read-only again (a ``read-only`` session's workspace under
    ``/tmp`` stays where it is), then the writable roots, then (from
    :func:`read_only_binds`) the protected paths read-only over them.
    """
    argv = [bwrap, *_NAMESPACES]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # bwrap covers /proc/sys and /proc/sysrq-trigger only when it cannot write them itself
    # without capabilities; run by root it can, so a command (uid 0, no capabilities) could
    # set the host's sysctls (kernel.core_pattern: code the kernel runs as root).
    for covered in _PROC_COVERED:
        if os.path.exists(covered):
            argv += ["--ro-bind", covered, covered]
    if private_tmp is not None:
        # First: a writable root under /tmp (pytest's, say) is then bound over it again.
        argv += ["--bind", os.fspath(private_tmp), "/tmp"]
        for path in visible:
            if path.is_relative_to("/tmp"):
                argv += ["--ro-bind", os.fspath(path), os.fspath(path)]
    for path in writable:
        argv += ["--bind", os.fspath(path), os.fspath(path)]
    return tuple(argv)


def read_only_binds(paths: Sequence[Path]) -> list[str]:
    """``--ro-bind`` options for those of ``paths`` that exist now.

    A missing one gets none: ``bwrap`` would create its mount point in the workspace.
    """
    argv: list[str] = []
    for path in paths:
        if os.path.exists(path):
            argv += ["--ro-bind", os.fspath(path), os.fspath(path)]
    return argv


def seccomp_pipe(program: bytes) -> int:
    """A pipe's read end holding ``program`` for one ``bwrap --seccomp`` (which reads it to
    the end); pass it to the child and close it after the spawn."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)  # a few hundred bytes: far below a pipe's size
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


# seccomp: a classic BPF program over struct seccomp_data {int nr; u32 arch; u64 ip;
# u64 args[6]}, in bwrap's --seccomp format (the raw struct sock_filter array).
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_RET_K: Final = 0x06
_RET_ALLOW: Final = 0x7FFF0000
_RET_EPERM: Final = 0x00050000 | 1
_AF_UNIX: Final = 1
_X32_BIT: Final = 0x40000000
_AUDIT_ARCH_I386: Final = 0x40000003
_NATIVE: Final = {
    # machine: (audit arch, socket's syscall number, compat (arch, numbers) or None)
    "x86_64": (0xC000003E, 41, (_AUDIT_ARCH_I386, (102, 359))),
    "aarch64": (0xC00000B7, 198, None),
}
"""``socket`` by architecture; a 32-bit program on x86_64 (``socketcall`` hides the family)
gets no socket at all while the network is off."""


_Instruction = tuple[int, int, str | None, str | None]
"""``(code, k, label if true, label if false)``; a ``str`` alone is a label."""


def _assemble(program: list[_Instruction | str]) -> bytes:
    """Classic BPF from instructions whose jumps name labels."""
    labels: dict[str, int] = {}
    instructions: list[_Instruction] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(instructions)
        else:
            instructions.append(item)
    out = []
    for index, (code, k, true, false) in enumerate(instructions):
        jt = labels[true] - index - 1 if true is not None else 0
        jf = labels[false] - index - 1 if false is not None else 0
        out.append(struct.pack("=HBBI", code, jt, jf, k))
    return b"".join(out)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The seccomp program that refuses ``socket(AF_UNIX, ...)`` with EPERM, or ``None`` on
    an architecture it does not know (``socketpair`` stays allowed: it reaches nothing)."""
    native = _NATIVE.get(machine if machine is not None else platform.machine())
    if native is None:
        return None
    arch, socket_nr, compat = native
    program: list[_Instruction | str] = [
        (_LD_W_ABS, 4, None, None),  # A = arch
        (_JEQ_K, arch, "native", "compat"),
        "native",
        (_LD_W_ABS, 0, None, None),  # A = syscall number
        (_JEQ_K, socket_nr, "family", None),
        (_JEQ_K, socket_nr | _X32_BIT, "family", "allow"),
        "family",
        (_LD_W_ABS, 16, None, None),  # A = low word of args[0] (little-endian)
        (_JEQ_K, _AF_UNIX, "deny", "allow"),
        "compat",
    ]
    if compat is not None:
        compat_arch, numbers = compat
        program += [(_JEQ_K, compat_arch, "compat-nr", "allow"), "compat-nr"]
        program.append((_LD_W_ABS, 0, None, None))
        program += [(_JEQ_K, number, "deny", None) for number in numbers]
    program += ["allow", (_RET_K, _RET_ALLOW, None, None), "deny", (_RET_K, _RET_EPERM, None, None)]
    return _assemble(program)
