"""The namespaces layer: every shell command runs under its own ``bwrap`` (bubblewrap).

What a command gets (``bwrap`` 0.4 or newer; Claude Code and Flatpak use it the same way):

* its own PID namespace: it sees, signals and reads the ``/proc/<pid>/environ`` of no host
  process (its ``$PPID`` is bubblewrap's init, which carries only the filtered environment);
* its own IPC and mount namespaces: the whole filesystem read-only (``--ro-bind / /``), the
  writable roots of the mode bound writable again, the protected paths under them bound
  read-only over that, a fresh ``/proc`` and a minimal ``/dev``;
* with the network off, an empty network namespace (only a loopback of its own): no
  protocol reaches anything outside (TCP, UDP, MPTCP, abstract UNIX sockets), and a socket it
  listens on is reachable from nowhere;
* ``--cap-drop ALL`` (a host running as root would hand it every capability, enough to
  unmount its read-only binds), ``--die-with-parent`` and ``--new-session`` (no terminal to
  inject input into). ``bwrap`` also sets ``no_new_privs``.

The process the host starts is the outer ``bwrap``; the host stops a command by signalling
the processes of its namespace (``toolbatch.sandbox._process``), and killing the outer
``bwrap`` (what the host reaper does on ``kill -9``) kills its init, which takes every
process of the namespace with it, ``setsid`` escapees included.

One ``bwrap`` per command costs about 3 ms on the 2-core development machine (``make bench``).
"""

from __future__ import annotations

import os
import shutil
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
) -> tuple[str, ...]:
    """The ``bwrap`` options that come before a command's protected paths (then ``--``).

    Mounts apply in order: everything read-only, then the writable roots, then (from
    :func:`read_only_binds`) the protected paths read-only over them.
    """
    argv = [bwrap, *_NAMESPACES]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if private_tmp is not None:
        # First: a writable root under /tmp (pytest's, say) is then bound over it again.
        argv += ["--bind", os.fspath(private_tmp), "/tmp"]
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
