"""The environment handed to processes toolbatch starts on the agent's behalf.

Command hooks and MCP stdio servers get only this documented default environment plus what
their own configuration names, never the agent's whole environment (which may hold API
keys). The model's shell commands get an environment chosen by a policy
(:func:`shell_environment`, ``SchedulerConfig(shell_env=...)``):

``"inherit"`` (default)
    The agent's environment minus every variable whose name contains ``KEY``, ``SECRET``,
    ``TOKEN``, ``PASSWORD`` or ``CREDENTIAL`` (any case): ``env`` run by the model shows no
    ``OPENAI_API_KEY`` or ``AWS_SECRET_ACCESS_KEY``. Codex's ``shell_environment_policy``
    drops ``*KEY*``, ``*SECRET*`` and ``*TOKEN*`` the same way when asked to.
``"minimal"``
    Only :data:`DEFAULT_INHERITED_ENV_VARS`, as MCP servers and command hooks get.
``"none"``
    Nothing (bash still sets its own defaults, such as a ``PATH``).

Then the variables matching ``allow`` (names or ``*``/``?`` globs, any case) are taken from
the agent's environment anyway, and ``overrides`` are set last.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Final, Literal, TypeAlias

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "SECRET_NAME_PARTS",
    "SHELL_ENV_MODES",
    "ShellEnvMode",
    "looks_secret",
    "minimal_environment",
    "shell_environment",
]

ShellEnvMode: TypeAlias = Literal["inherit", "minimal", "none"]
SHELL_ENV_MODES: Final[tuple[ShellEnvMode, ...]] = ("inherit", "minimal", "none")
SECRET_NAME_PARTS: Final = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")
"""A variable whose name contains one of these (any case) is not inherited by default."""

DEFAULT_INHERITED_ENV_VARS: Final = (
    # identity, paths and locale
    "HOME",
    "LOGNAME",
    "USER",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    # network plumbing a server needs to reach anything the agent can reach
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)
"""The only variables inherited from the agent's environment (when they are set)."""


def minimal_environment(
    extra: Mapping[str, str] | None = None, *, inherited: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The default variables of ``inherited`` (default ``os.environ``), then ``extra``.

    A value starting with ``()`` (an exported shell function) is never passed on.
    """
    source = os.environ if inherited is None else inherited
    env = {
        name: value
        for name in DEFAULT_INHERITED_ENV_VARS
        if (value := source.get(name)) is not None and not value.startswith("()")
    }
    if extra:
        env.update(extra)
    return env


def looks_secret(name: str) -> bool:
    """Whether ``name`` contains ``KEY``, ``SECRET``, ``TOKEN``, ``PASSWORD`` or ``CREDENTIAL``."""
    upper = name.upper()
    return any(part in upper for part in SECRET_NAME_PARTS)


def shell_environment(
    mode: ShellEnvMode = "inherit",
    *,
    allow: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    inherited: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of the model's shell commands (see the module docstring).

    Args:
        mode: ``"inherit"``, ``"minimal"`` or ``"none"``.
        allow: names or globs (``AWS_*``) taken from ``inherited`` whatever ``mode`` says.
        overrides: values set last.
        inherited: the agent's environment (default ``os.environ``).
    """
    source = os.environ if inherited is None else inherited
    if mode == "inherit":
        env = {name: value for name, value in source.items() if not looks_secret(name)}
    elif mode == "minimal":
        env = minimal_environment(inherited=source)
    else:
        env = {}
    if allow:
        patterns = [pattern.upper() for pattern in allow]
        for name, value in source.items():
            if name not in env and any(fnmatchcase(name.upper(), p) for p in patterns):
                env[name] = value
    if overrides:
        env.update(overrides)
    return env
