"""The sandbox and environment of the model's shell commands: what they may reach.

Modes (``SchedulerConfig(sandbox=...)``, ``--sandbox``):

``"workspace-write"`` (default)
    Commands read and execute anything, but write only beneath the workspace roots (default:
    the current directory when the scheduler opens), the artifact store's directories and
    the system temp dir (``tempfile.gettempdir()`` and ``/tmp``), as Codex allows by default.
    ``private_tmp=True`` replaces the system temp dir with a private one.
``"read-only"``
    Commands read and execute anything and write only to a private temp dir.
``"off"``
    No confinement.

Every mode may also write the terminal-like devices (``/dev/null``, ``/dev/tty``, ...). The
network is off by default (``network=True`` allows it). A private temp dir
(``toolbatch-sandbox-tmp-*``) is made on open, handed to commands as ``TMPDIR``, ``TMP`` and
``TEMP`` (and mounted on ``/tmp`` under bubblewrap), and removed on close.

Protected paths stay read-only beneath the writable roots: ``PROTECTED_NAMES`` (``.git``,
``.claude``, ``.mcp.json``, ...) in every workspace root, and ``protected_paths`` (the
scheduler adds the settings and MCP files in use, the hooks' and servers' scripts, the
recording and the artifact directories). A ``PROTECTED_NAMES`` entry that does not exist when
a command starts and exists when it ends was created by the command: it is removed and the
result says so (``git init`` included: a ``.git`` made by the model is a hook the user's next
``git`` would run).

How it is enforced, in layers
    1. Namespaces (``toolbatch.sandbox._bubblewrap``): the session's commands under one
       ``bwrap`` started once (``toolbatch.sandbox._spawner``; a ``bwrap`` per command where
       it cannot start), with PID, IPC and mount namespaces of their own, and an empty
       network namespace when the network is off; protected paths are read-only mounts.
    2. Landlock (``toolbatch.sandbox._landlock``), inherited by everything inside: signals
       and abstract UNIX sockets scoped to the sandbox (ABI 6) and, with the network off,
       TCP ``connect`` and ``bind`` denied (ABI 4). A Landlock domain that handles
       filesystem rights forbids ``mount``, which ``bwrap`` needs, so under bubblewrap the
       write rules are the mounts'; applying Landlock's own after ``bwrap`` would need one
       more ``exec`` per command (about 10 ms through Python).
    Where bubblewrap is missing or cannot create namespaces, Landlock alone confines writes
    (as below), and ``sandbox.partial`` says what that leaves open: the host's processes are
    visible (and readable: ``/proc/<pid>/environ`` of the same user), protected paths are
    writable (only fingerprinting, ``toolbatch.sandbox._pinning``, stops their use), and only
    TCP is cut from the network.

Landlock alone
    No external binary. The ruleset is built once,
    when the policy is opened, and applied to one dedicated *spawner thread*: Landlock and
    ``no_new_privs`` confine a thread and everything it forks, so every command started from
    that thread, and every descendant of it, is confined from its first instruction, while
    the host's other threads are not. Starting a command there costs one hop to that thread
    (about 0.1 ms); nothing runs in the child between ``fork`` and ``exec``, so ``vfork``
    stays usable and the cost does not grow with the host's memory (a ``preexec_fn`` would
    force a full ``fork``: about 2.5 ms at 10 MB of host memory, 7.5 ms at 300 MB).

    A denied write or connect is the command's own failure (``Permission denied``), which
    the model reads like any other; a failing command's result names the sandbox that
    applied. Symlinks and ``..`` do not escape: rules hold the directories they were made
    for, checked on the path the kernel actually resolves.

Where Landlock is missing (not Linux, a kernel before 5.13, or disabled at boot) or lacks a
right the mode needs, opening the policy logs one warning (``sandbox.unavailable`` or
``sandbox.partial``); commands then run with what can be enforced, or, with
``required=True``, every command is refused with that reason.

What it does not do: it does not hide files from reading, limit CPU, memory or processes;
command hooks and MCP servers are configured by the user, not chosen by the model, and are
not sandboxed by it (their scripts are fingerprinted instead).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import structlog

from toolbatch.errors import ConfigError
from toolbatch.sandbox import _landlock
from toolbatch.sandbox._bubblewrap import (
    PROTECTED_NAMES,
    find_bubblewrap,
    read_only_binds,
    seccomp_pipe,
)
from toolbatch.sandbox._confinement import LandlockProbe, NamespacesProbe, confine
from toolbatch.sandbox._environment import ShellEnvMode, shell_environment
from toolbatch.sandbox._options import SandboxMode, SandboxOptions
from toolbatch.sandbox._process import SpawnThread
from toolbatch.sandbox._spawner import Spawner

__all__ = ["ProcessPolicy", "open_process_policy", "open_sandbox"]

log = structlog.get_logger("toolbatch.sandbox")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ProcessPolicy:
    """What the model's commands may reach: the sandbox they run in and their environment.

    Made by :func:`open_process_policy` (the scheduler opens one per session and passes it
    to every call as ``ProducerContext.process_policy``). ``ProcessPolicy()`` is no policy:
    unconfined, the agent's own environment.

    Attributes:
        sandbox: the mode asked for.
        enforced: whether the commands are confined (by namespaces, Landlock or both).
        layers: the layers that confine them, e.g. ``("bubblewrap", "landlock")``.
        writable: the directories commands may write beneath (and ``WRITABLE_DEVICES``),
            when enforced.
        protected: the paths kept read-only beneath them (those that exist are mounted
            read-only; one a command creates is removed after it).
        network: whether commands may reach the network.
        temp_dir: the private temp dir handed to commands as ``TMPDIR``, if any.
        required: refuse every command when the sandbox cannot be (fully) enforced.
        environment: the commands' complete environment (``None``: the agent's own).
        problem: why the sandbox is not (fully) enforced, if it is not.
    """

    sandbox: SandboxMode = "off"
    enforced: bool = False
    layers: tuple[str, ...] = ()
    writable: tuple[Path, ...] = ()
    protected: tuple[Path, ...] = ()
    network: bool = True
    temp_dir: Path | None = None
    required: bool = False
    environment: Mapping[str, str] | None = field(default=None, repr=False)
    problem: str | None = None
    spawn_thread: SpawnThread | None = field(default=None, repr=False)
    """Where commands are started so that they are confined (``None``: anywhere)."""
    wrapper: tuple[str, ...] = field(default=(), repr=False)
    """The ``bwrap`` options each command runs under (``()``: no namespaces)."""
    seccomp: bytes | None = field(default=None, repr=False)
    """The seccomp program ``bwrap`` applies (no UNIX sockets while the network is off)."""
    spawner: Spawner | None = field(default=None, repr=False)
    """The session's long-lived ``bwrap`` that starts each command (``_spawner``)."""
    _guarded: tuple[tuple[Path, str], ...] = field(default=(), init=False, repr=False)
    """The protected paths with a ``PROTECTED_NAMES`` name, and their strings (looked up
    before and after every command: made once)."""

    def __post_init__(self) -> None:
        guarded = tuple(
            (path, os.fspath(path)) for path in self.protected if path.name in PROTECTED_NAMES
        )
        object.__setattr__(self, "_guarded", guarded)  # frozen: set once, here

    @property
    def namespaced(self) -> bool:
        """Whether each command runs in namespaces of its own (under ``bwrap``)."""
        return bool(self.wrapper)

    def command_argv(
        self, argv: list[str], *, cwd: Path, seccomp_fd: int | None = None
    ) -> list[str]:
        """``argv`` as started in ``cwd`` under this policy: inside ``bwrap`` when
        namespaced, with the protected paths that exist now mounted read-only and the
        seccomp program read from ``seccomp_fd`` (from :meth:`open_seccomp`)."""
        if not self.wrapper:
            return argv
        binds = read_only_binds(self.protected)
        filters = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        # --chdir: bwrap would fall back to $HOME, silently, if cwd were not in the sandbox.
        return [*self.wrapper, *binds, *filters, "--chdir", os.fspath(cwd), "--", *argv]

    def open_seccomp(self) -> int | None:
        """A pipe's read end holding :attr:`seccomp` for one ``bwrap`` (which reads it to the
        end), or ``None`` without one; pass it to the child and close it after the spawn."""
        if self.seccomp is None or not self.wrapper:
            return None
        return seccomp_pipe(self.seccomp)

    def absent_protected(self) -> tuple[Path, ...]:
        """The ``PROTECTED_NAMES`` of the workspace roots that do not exist now: a command
        must not create them. (Other protected paths are often the host's own output, made
        later by the host itself: they are protected once they exist.)"""
        if self.sandbox == "off":
            return ()
        return tuple(path for path, name in self._guarded if not os.path.lexists(name))

    def remove_created(self, absent: Sequence[Path]) -> list[Path]:
        """Remove those of ``absent`` that exist now (a command made them); returns them."""
        created = [path for path in absent if os.path.lexists(path)]
        for path in created:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
        if created:
            log.warning("sandbox.protected_created", paths=[str(path) for path in created])
        return created

    def refusal(self) -> str | None:
        """Why every command must be refused (a required sandbox that is missing), if so."""
        if not self.required or self.sandbox == "off" or self.problem is None:
            return None
        return (
            f"the {self.sandbox} sandbox is required but cannot be enforced here: "
            f"{self.problem}; install bubblewrap and run on Linux 6.7 or newer with Landlock "
            f"enabled, or drop sandbox_required (--sandbox-required) to run commands without it"
        )

    def describe(self) -> str:
        """One line for the model: the sandbox that applied to its command."""
        if self.sandbox == "off":
            return "sandbox: off"
        if not self.enforced:
            return f"sandbox: none ({self.sandbox} was asked for, but {self.problem})"
        places = ", ".join(str(path) for path in self.writable)
        if self.network:
            network = "network allowed"
        elif self.namespaced:
            network = "network off"
        else:
            network = "TCP connect and bind denied"
        layers = " + ".join(self.layers)
        protected = ", protected paths read-only" if self.namespaced else ""
        line = (
            f"sandbox: {self.sandbox} ({layers}); writes allowed only under {places}"
            f"{protected}; {network}"
        )
        if self.problem is not None:
            line += f"; not enforced: {self.problem}"
        return line


def _directories(option: str, paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    resolved = []
    for raw in paths:
        path = Path(raw).expanduser().absolute()
        if not path.is_dir():
            raise ConfigError(
                f"{option} {str(path)!r} is not a directory; create it or give an existing one"
            )
        resolved.append(path.resolve())
    return resolved


def _system_temp_dirs() -> list[Path]:
    found = []
    for candidate in (tempfile.gettempdir(), "/tmp"):
        path = Path(candidate).resolve()
        if path.is_dir() and path not in found:
            found.append(path)
    return found


def open_process_policy(
    *,
    sandbox: SandboxMode = "workspace-write",
    workspace_roots: Sequence[str | os.PathLike[str]] | None = None,
    writable_dirs: Sequence[str | os.PathLike[str]] = (),
    protected_paths: Sequence[str | os.PathLike[str]] = (),
    network: bool = False,
    private_tmp: bool = False,
    required: bool = False,
    shell_env: ShellEnvMode = "inherit",
    shell_env_allow: Sequence[str] = (),
    shell_env_set: Mapping[str, str] | None = None,
    inherited_env: Mapping[str, str] | None = None,
    landlock_probe: LandlockProbe = _landlock.abi_version,
    namespaces_probe: NamespacesProbe = find_bubblewrap,
) -> contextlib.AbstractContextManager[ProcessPolicy]:
    """Resolve the options once into a :class:`ProcessPolicy`; close it when done.

    The keyword form of :func:`open_sandbox` (``private_tmp`` and ``required`` are
    ``SandboxOptions.sandbox_private_tmp`` and ``sandbox_required``; the other options are
    named as there).

    Args:
        writable_dirs: also writable in ``workspace-write``; those that do not exist yet are
            skipped.
        inherited_env: the agent's environment (default ``os.environ``, read once here).
        landlock_probe: how the Landlock ABI is found (tests simulate other kernels).
        namespaces_probe: how ``bwrap`` is found and checked (tests simulate its absence).

    Raises:
        ConfigError: an option is malformed or a workspace root is not a directory.
    """
    options = SandboxOptions(
        sandbox=sandbox,
        workspace_roots=workspace_roots,
        network=network,
        protected_paths=protected_paths,
        sandbox_private_tmp=private_tmp,
        sandbox_required=required,
        shell_env=shell_env,
        shell_env_allow=shell_env_allow,
        shell_env_set=dict(shell_env_set) if shell_env_set is not None else {},
    )
    return open_sandbox(
        options,
        writable_dirs=writable_dirs,
        inherited_env=inherited_env,
        landlock_probe=landlock_probe,
        namespaces_probe=namespaces_probe,
    )


@contextlib.contextmanager
def open_sandbox(
    options: SandboxOptions,
    /,
    *,
    protected_paths: Sequence[str | os.PathLike[str]] | None = None,
    writable_dirs: Sequence[str | os.PathLike[str]] = (),
    inherited_env: Mapping[str, str] | None = None,
    landlock_probe: LandlockProbe = _landlock.abi_version,
    namespaces_probe: NamespacesProbe = find_bubblewrap,
) -> Iterator[ProcessPolicy]:
    """The :class:`ProcessPolicy` that ``options`` describe, resolved once; closed on exit.

    Args:
        options: the checked options (a ``SchedulerConfig`` is one).
        protected_paths: the paths kept read-only beside ``PROTECTED_NAMES`` in each
            workspace root (default: ``options.protected_paths``; a scheduler passes those
            and the files the session itself reads or runs).
        writable_dirs: also writable in ``workspace-write``; those that do not exist yet are
            skipped.
        inherited_env: the agent's environment (default ``os.environ``, read once here).
        landlock_probe: how the Landlock ABI is found (tests simulate other kernels).
        namespaces_probe: how ``bwrap`` is found and checked (tests simulate its absence).

    Raises:
        ConfigError: a workspace root is not a directory.
    """
    sandbox = options.sandbox
    workspace_roots = options.workspace_roots
    network = options.network
    private_tmp = options.sandbox_private_tmp
    required = options.sandbox_required
    shell_env = options.shell_env
    shell_env_allow = options.shell_env_allow
    overrides = options.shell_env_set
    if protected_paths is None:
        protected_paths = options.protected_paths
    roots = _directories(
        "workspace root", workspace_roots if workspace_roots is not None else [Path.cwd()]
    )
    with contextlib.ExitStack() as stack:
        temp_dir: Path | None = None
        if sandbox == "read-only" or (sandbox == "workspace-write" and private_tmp):
            temp_dir = Path(tempfile.mkdtemp(prefix="toolbatch-sandbox-tmp-")).resolve()
            stack.callback(shutil.rmtree, temp_dir, ignore_errors=True)
        environment = shell_environment(shell_env, allow=shell_env_allow, inherited=inherited_env)
        if temp_dir is not None:
            environment.update(TMPDIR=str(temp_dir), TMP=str(temp_dir), TEMP=str(temp_dir))
        environment.update(overrides)
        writable: list[Path] = []
        if sandbox == "workspace-write":
            writable.extend(roots)
            writable.extend(Path(d).absolute().resolve() for d in writable_dirs if Path(d).is_dir())
            if temp_dir is None:
                writable.extend(_system_temp_dirs())
        if temp_dir is not None:
            writable.append(temp_dir)
        writable = list(dict.fromkeys(writable))
        protected = [root / name for root in roots for name in PROTECTED_NAMES]
        protected.extend(_protected(protected_paths))
        policy = ProcessPolicy(
            sandbox=sandbox,
            protected=tuple(dict.fromkeys(protected)),
            network=network,
            temp_dir=temp_dir,
            required=required,
            environment=MappingProxyType(environment),
        )
        if sandbox != "off":
            policy = confine(policy, writable, roots, landlock_probe, namespaces_probe, stack)
        yield policy


def _protected(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Each path as given (absolute) and, for a symlink, where it leads."""
    found = []
    for raw in paths:
        path = Path(raw).expanduser().absolute()
        found.append(path)
        if path.is_symlink():
            found.append(path.resolve())
    return found
