"""The sandbox and environment options of the model's shell commands, declared once:
their names, defaults, validation and command-line flags (``SandboxOptions``).

``SchedulerConfig`` is a ``SandboxOptions``; ``toolbatch run``, ``serve`` and ``acp`` make
one flag per field from ``sandbox_flags()``; ``open_sandbox`` (``_policy``) resolves them
into the policy the commands run under. A new option is one field here (and its effect in
``open_sandbox``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Final, Literal, TypeAlias

from toolbatch.errors import ConfigError
from toolbatch.sandbox._environment import SHELL_ENV_MODES, ShellEnvMode

__all__ = [
    "SANDBOX_MODES",
    "CommandLineFlag",
    "FlagKind",
    "SandboxMode",
    "SandboxOptions",
    "sandbox_flags",
]

SandboxMode: TypeAlias = Literal["workspace-write", "read-only", "off"]
SANDBOX_MODES: Final[tuple[SandboxMode, ...]] = ("workspace-write", "read-only", "off")
FlagKind: TypeAlias = Literal["choice", "switch", "list", "assignments"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandLineFlag:
    """How a sandbox option is spelled on the command line (``run``, ``serve``, ``acp``).

    Attributes:
        flag: the option, e.g. ``--sandbox``.
        kind: how it takes its value: ``"choice"`` one of ``choices``, ``"switch"`` none
            (``True``; ``negation`` gives ``False``), ``"list"`` one per use (repeatable),
            ``"assignments"`` one ``NAME=VALUE`` per use (repeatable).
        help: its help text.
        metavar: the value's name in the help (flags that take a value).
        choices: the values it takes, for a closed set.
        negation: the flag that sets a boolean option back to ``False``, if any.
        negation_help: that flag's help text.
    """

    flag: str
    kind: FlagKind
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    negation: str | None = None
    negation_help: str | None = None


def _flag(
    flag: str,
    kind: FlagKind,
    help: str,
    *,
    metavar: str | None = None,
    choices: tuple[str, ...] = (),
    negation: str | None = None,
    negation_help: str | None = None,
) -> Mapping[str, CommandLineFlag]:
    """A field's metadata: its flag on the command line (``sandbox_flags``)."""
    cli = CommandLineFlag(
        flag=flag,
        kind=kind,
        help=help,
        metavar=metavar,
        choices=choices,
        negation=negation,
        negation_help=negation_help,
    )
    return {"cli": cli}


@dataclass(frozen=True, slots=True, kw_only=True)
class SandboxOptions:
    """The sandbox and environment of the model's shell commands, declared once.

    ``SchedulerConfig`` has these fields (it is a ``SandboxOptions``); ``toolbatch run``,
    ``serve`` and ``acp`` take one flag per field (``CommandLineFlag`` in its metadata), and
    ``open_sandbox`` makes the policy from them. A new option is one field here.
    Every value is checked at construction; a bad one raises ``ConfigError`` naming it and
    the fix.

    Attributes:
        sandbox: what the model's shell commands may write: ``"workspace-write"`` (the
            workspace roots, the artifact directories and the system temp dir),
            ``"read-only"`` (a private temp dir only) or ``"off"``; enforced with
            bubblewrap's namespaces and Landlock (``toolbatch.sandbox._policy``).
        workspace_roots: the directories ``workspace-write`` commands may write (``None``:
            the current directory when the policy opens).
        network: ``True`` lets the commands reach the network (default: off).
        protected_paths: files and directories kept read-only from the commands, beside
            ``PROTECTED_NAMES`` (``.git``, ``.claude``, ``.mcp.json``, ``.vscode``,
            ``.codex``, ``.toolbatch``) in every workspace root; a scheduler adds the
            settings and MCP files, the hooks' and servers' scripts and the artifact
            directories (``toolbatch.scheduler._protection``).
        sandbox_private_tmp: ``workspace-write`` commands get a private temp dir instead of
            the system's.
        sandbox_required: refuse every shell command when the sandbox cannot be enforced
            (default: say so once and run them unconfined).
        shell_env: the commands' environment: ``"inherit"`` (the agent's, minus names
            holding KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL), ``"minimal"`` or ``"none"``.
        shell_env_allow: variable names or globs kept from the agent's environment anyway.
        shell_env_set: variables set for every command.
    """

    sandbox: SandboxMode = field(
        default="workspace-write",
        metadata=_flag(
            "--sandbox",
            "choice",
            "what shell commands may write: workspace-write (default: the workspace and the "
            "temp dir, protected paths excepted), read-only (a private temp dir only) or off",
            metavar="MODE",
            choices=SANDBOX_MODES,
        ),
    )
    workspace_roots: Sequence[str | os.PathLike[str]] | None = field(
        default=None,
        metadata=_flag(
            "--workspace",
            "list",
            "a directory workspace-write commands may write (repeatable; default: the "
            "current directory)",
            metavar="DIR",
        ),
    )
    network: bool = field(
        default=False,
        metadata=_flag(
            "--network",
            "switch",
            "let shell commands reach the network (default: off in the sandbox)",
            negation="--no-network",
            negation_help="keep shell commands off the network (the default)",
        ),
    )
    protected_paths: Sequence[str | os.PathLike[str]] = field(
        default=(),
        metadata=_flag(
            "--protect",
            "list",
            "keep PATH read-only from shell commands (repeatable; beside .git, .claude, "
            ".mcp.json, .vscode, .codex, .toolbatch, the settings, hook and MCP scripts)",
            metavar="PATH",
        ),
    )
    sandbox_private_tmp: bool = field(
        default=False,
        metadata=_flag(
            "--sandbox-private-tmp",
            "switch",
            "give shell commands a private temp dir instead of the system's",
        ),
    )
    sandbox_required: bool = field(
        default=False,
        metadata=_flag(
            "--sandbox-required",
            "switch",
            "refuse shell commands when the sandbox cannot be enforced (default: warn once "
            "and run them unconfined)",
        ),
    )
    shell_env: ShellEnvMode = field(
        default="inherit",
        metadata=_flag(
            "--shell-env",
            "choice",
            "shell commands' environment: inherit (default: the agent's minus names holding "
            "KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL), minimal or none",
            metavar="MODE",
            choices=SHELL_ENV_MODES,
        ),
    )
    shell_env_allow: Sequence[str] = field(
        default=(),
        metadata=_flag(
            "--shell-env-allow",
            "list",
            "a variable name or glob kept in the shell's environment anyway (repeatable)",
            metavar="NAME",
        ),
    )
    shell_env_set: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_flag(
            "--shell-env-set",
            "assignments",
            "a variable set for every shell command (repeatable)",
            metavar="NAME=VALUE",
        ),
    )

    def __post_init__(self) -> None:
        if self.sandbox not in SANDBOX_MODES:
            raise ConfigError(
                f"sandbox must be 'workspace-write', 'read-only' or 'off', got {self.sandbox!r}"
            )
        if self.workspace_roots is not None:
            _check_paths(
                "workspace_roots",
                self.workspace_roots,
                "a list of directories or None (the current directory)",
                "a directory path",
            )
        _check_bool("network", self.network, "True lets commands reach the network, False cuts it")
        _check_paths("protected_paths", self.protected_paths, "a list of paths")
        _check_bool(
            "sandbox_private_tmp",
            self.sandbox_private_tmp,
            "True gives commands a private temp dir",
        )
        _check_bool(
            "sandbox_required", self.sandbox_required, "True refuses commands without a sandbox"
        )
        if self.shell_env not in SHELL_ENV_MODES:
            raise ConfigError(
                f"shell_env must be 'inherit', 'minimal' or 'none', got {self.shell_env!r}"
            )
        allow = self.shell_env_allow
        if isinstance(allow, str | bytes) or not isinstance(allow, Sequence):
            raise ConfigError(
                f"shell_env_allow must be a list of variable names or globs, got {allow!r}; "
                f"wrap a single name in a list"
            )
        for name in allow:
            _check_env_name("shell_env_allow", name)
        if not isinstance(self.shell_env_set, Mapping):
            raise ConfigError(
                f"shell_env_set must map variable names to values, got {self.shell_env_set!r}; "
                f"give a dict such as {{'CI': '1'}}"
            )
        for name, value in self.shell_env_set.items():
            _check_env_name("shell_env_set", name)
            if not isinstance(value, str) or "\0" in value:
                raise ConfigError(
                    f"shell_env_set[{name!r}] must be a string without NUL, got {value!r}"
                )


def sandbox_flags() -> list[tuple[str, CommandLineFlag]]:
    """Each ``SandboxOptions`` field's name and its flag on the command line, in order."""
    return [(option.name, option.metadata["cli"]) for option in fields(SandboxOptions)]


def _check_bool(name: str, value: object, flag: str) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}; {flag}")


def _check_paths(name: str, value: object, shape: str, element: str = "a path") -> None:
    if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be {shape}, got {value!r}; wrap a single path in a list")
    for path in value:
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise ConfigError(f"{name} holds {path!r}, not {element}; give paths")


def _check_env_name(option: str, name: object) -> None:
    if not isinstance(name, str) or not name or "=" in name or "\0" in name:
        raise ConfigError(
            f"{option} holds {name!r}, not a variable name; give names such as 'CI' "
            f"(without '=' or NUL)"
        )
