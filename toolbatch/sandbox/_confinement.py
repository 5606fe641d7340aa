"""How a :class:`~toolbatch.sandbox._policy.ProcessPolicy` gets its layers: bubblewrap's
namespaces (and the session's spawner) with Landlock's scopes inside, or Landlock alone where
bubblewrap is missing, each missing layer said in one warning (see ``_policy`` for what each
layer enforces, and why).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeAlias

import anyio.to_thread
import structlog

from toolbatch.sandbox import _landlock
from toolbatch.sandbox._bubblewrap import (
    namespace_argv,
    read_only_binds,
    seccomp_pipe,
    unix_socket_filter,
)
from toolbatch.sandbox._spawner import Spawner

if TYPE_CHECKING:
    from toolbatch.sandbox._policy import ProcessPolicy

__all__ = ["WRITABLE_DEVICES", "LandlockProbe", "NamespacesProbe", "confine"]

log = structlog.get_logger("toolbatch.sandbox")

WRITABLE_DEVICES: Final = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)
"""Devices every mode may write (``> /dev/null`` must keep working)."""

LandlockProbe: TypeAlias = Callable[[], int]
"""Returns the kernel's Landlock ABI version, 0 when there is none (tests simulate kernels)."""
NamespacesProbe: TypeAlias = Callable[[], tuple[str | None, str | None]]
"""Returns the ``bwrap`` to use, or ``None`` and why there is none (tests simulate hosts)."""

_FS_NEEDED_ABI: Final = 3
"""The ABI that handles every write right (``TRUNCATE`` came in 3)."""
_DEVICE_RIGHTS: Final = _landlock.ACCESS_FS_WRITE_FILE | _landlock.ACCESS_FS_TRUNCATE


@dataclass(slots=True, eq=False)
class _ConfinedThread:
    """One thread confined by a Landlock ruleset; commands started from it inherit it."""

    executor: ThreadPoolExecutor

    @classmethod
    def start(cls, ruleset_fd: int) -> _ConfinedThread:
        """Start the thread and confine it (raises ``OSError`` when the kernel refuses)."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolbatch-sandbox")
        try:
            # max_workers=1: this first task runs on the only thread every later one uses.
            executor.submit(_landlock.restrict_current_thread, ruleset_fd).result()
        except BaseException:
            executor.shutdown(wait=True)
            raise
        return cls(executor)

    async def run(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        future = self.executor.submit(start)
        # Not abandoned on cancel: the caller must get the process it started, to stop it.
        return await anyio.to_thread.run_sync(future.result)

    def close(self) -> None:
        self.executor.shutdown(wait=True)


def confine(
    policy: ProcessPolicy,
    writable: list[Path],
    roots: list[Path],
    probe: LandlockProbe,
    namespaces_probe: NamespacesProbe,
    stack: contextlib.ExitStack,
) -> ProcessPolicy:
    """``policy`` with its layers (namespaces, Landlock), or with the reason there are none."""
    abi = probe()
    bwrap, no_namespaces = namespaces_probe()
    if bwrap is not None:
        return _namespaced(policy, writable, roots, bwrap, abi, stack)
    consequence = (
        "every shell command is refused (sandbox_required)"
        if policy.required
        else "shell commands run without it"
    )
    if abi <= 0:
        problem = (
            f"Landlock is not available on this kernel (Linux 5.13+ with Landlock enabled) "
            f"and {no_namespaces}"
        )
        log.warning(
            "sandbox.unavailable", mode=policy.sandbox, reason=problem, consequence=consequence
        )
        return dataclasses.replace(policy, problem=problem)
    supported = _landlock.fs_rights(abi)
    handled_fs = _landlock.FS_WRITE_RIGHTS & supported
    missing = []
    if abi < _FS_NEEDED_ABI:
        names = _landlock.right_names(_landlock.FS_WRITE_RIGHTS & ~supported)
        missing.append(f"the write rights {', '.join(names)}")
    handled_net = 0
    if not policy.network:
        if abi >= _landlock.NET_ABI:
            handled_net = _landlock.NET_RIGHTS
        else:
            missing.append("TCP connect and bind (network=False)")
    try:
        ruleset = _landlock.create_ruleset(
            handled_fs=handled_fs, handled_net=handled_net, scoped=_scopes(abi)
        )
        try:
            for path in writable:
                _landlock.allow_beneath(ruleset, path, handled_fs)
            for device in WRITABLE_DEVICES:
                if os.path.exists(device):
                    rights = handled_fs if os.path.isdir(device) else _DEVICE_RIGHTS & handled_fs
                    _landlock.allow_beneath(ruleset, device, rights)
            thread = _ConfinedThread.start(ruleset)
        finally:
            os.close(ruleset)
    except OSError as exc:
        refused = f"Landlock refused the ruleset ({exc}) and {no_namespaces}"
        log.warning(
            "sandbox.unavailable", mode=policy.sandbox, reason=refused, consequence=consequence
        )
        return dataclasses.replace(policy, problem=refused)
    stack.callback(thread.close)
    partial = (
        f"no namespaces, {no_namespaces}: commands see and read the host's processes, "
        f"protected paths are writable (a changed hook or MCP server script is still "
        f"refused), and only TCP is cut from the network"
    )
    if missing:
        partial += f"; Landlock ABI {abi} cannot enforce {' or '.join(missing)}"
    log.warning(
        "sandbox.partial",
        mode=policy.sandbox,
        layers=["landlock"],
        reason=partial,
        consequence=consequence if policy.required else "the rest is enforced",
    )
    log.info(
        "sandbox.ready",
        mode=policy.sandbox,
        layers=["landlock"],
        abi=abi,
        writable=[str(path) for path in writable],
        network=policy.network,
    )
    return dataclasses.replace(
        policy,
        enforced=True,
        layers=("landlock",),
        writable=tuple(writable),
        problem=partial,
        spawn_thread=thread,
    )


def _scopes(abi: int) -> int:
    """What Landlock scopes to the sandbox on this ABI: signals and abstract sockets (6+)."""
    if abi < _landlock.SCOPE_ABI:
        return 0
    return _landlock.SCOPE_SIGNAL | _landlock.SCOPE_ABSTRACT_UNIX_SOCKET


def _namespaced(
    policy: ProcessPolicy,
    writable: list[Path],
    roots: list[Path],
    bwrap: str,
    abi: int,
    stack: contextlib.ExitStack,
) -> ProcessPolicy:
    """``policy`` under bubblewrap, with Landlock's scopes (and TCP rules) inside when the
    kernel has them: a ruleset without filesystem rights leaves ``bwrap`` free to mount."""
    wrapper = namespace_argv(
        bwrap,
        writable=writable,
        network=policy.network,
        private_tmp=policy.temp_dir,
        visible=roots,
    )
    handled_net = _landlock.NET_RIGHTS if not policy.network and abi >= _landlock.NET_ABI else 0
    scoped = _scopes(abi)
    layers = ["bubblewrap"]
    seccomp = None if policy.network else unix_socket_filter()
    if seccomp is None and not policy.network:
        log.warning(
            "sandbox.partial",
            mode=policy.sandbox,
            reason=f"no seccomp filter for {platform.machine()}: commands may connect to UNIX "
            f"socket files they can see (docker.sock, an ssh-agent's)",
            consequence="the rest is enforced",
        )
    thread = None
    if handled_net or scoped:
        try:
            ruleset = _landlock.create_ruleset(handled_fs=0, handled_net=handled_net, scoped=scoped)
            try:
                thread = _ConfinedThread.start(ruleset)
            finally:
                os.close(ruleset)
        except OSError as exc:
            # The namespaces hold alone: every right this layer adds, they enforce too.
            log.warning("sandbox.landlock_refused", error=str(exc), layers=layers)
        else:
            stack.callback(thread.close)
            layers.append("landlock")
    if seccomp is not None:
        layers.append("seccomp")
    spawner = Spawner(
        wrapper=wrapper,
        binds=lambda: read_only_binds(policy.protected),
        watched=(*policy.protected, *writable),
        environment=policy.environment or {},
        seccomp=lambda: None if seccomp is None else seccomp_pipe(seccomp),
        spawn_thread=thread,
    )
    stack.callback(spawner.close)  # before the confined thread's (the stack unwinds LIFO)
    log.info(
        "sandbox.ready",
        mode=policy.sandbox,
        layers=layers,
        abi=abi,
        bwrap=bwrap,
        writable=[str(path) for path in writable],
        protected=[str(path) for path in policy.protected if os.path.lexists(path)],
        network=policy.network,
    )
    return dataclasses.replace(
        policy,
        enforced=True,
        layers=tuple(layers),
        writable=tuple(writable),
        spawn_thread=thread,
        wrapper=wrapper,
        seccomp=seccomp,
        spawner=spawner,
    )
