"""The environment handed to processes toolbatch starts on the agent's behalf.

Command hooks and MCP stdio servers get only this documented default environment plus what
their own configuration names, never the agent's whole environment (which may hold API
keys). The model's shell commands get an environment chosen by a policy
(:func:`shell_environment`, ``SchedulerConfig(shell_env=...)``):

``"inherit"`` (default)
    The agent's environment minus every variable that looks secret (:func:`looks_secret`):
    a name containing ``KEY``, ``SECRET``, ``TOKEN``, ``PASSWORD`` or ``CREDENTIAL``, or
    ending in ``_PAT`` or ``_DSN`` (any case), the OTLP exporter's headers, and any variable
    whose value is a URL with a password (``postgres://user:pw@host/db``): ``env`` run by
    the model shows no ``OPENAI_API_KEY``, ``GITHUB_PAT`` or ``DATABASE_URL``. Codex's
    ``shell_environment_policy`` drops ``*KEY*``, ``*SECRET*`` and ``*TOKEN*`` the same way
    when asked to.
``"minimal"``
    Only :data:`DEFAULT_INHERITED_ENV_VARS`, as MCP servers and command hooks get.
``"none"``
    Nothing (bash still sets its own defaults, such as a ``PATH``).

Then the variables matching ``allow`` (names or ``*``/``?`` globs, any case) are taken from
the agent's environment anyway, and ``overrides`` are set last.
"""

from __future__ import annotations

import os
import re
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
SECRET_NAME_SUFFIXES: Final = ("_PAT", "_DSN")
"""Nor one whose name ends in one of these (a personal access token, a Sentry-style DSN)."""
SECRET_NAMES: Final = frozenset({"PAT", "DSN"})
_SECRET_NAME_PATTERN: Final = re.compile(r"OTEL_EXPORTER_OTLP(_[A-Z]+)?_HEADERS")
"""The OTLP exporter's headers carry the collector's API key."""
_URL_WITH_PASSWORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:[^/?#@\s]*@")

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


def looks_secret(name: str, value: str = "") -> bool:
    """Whether a variable is kept from commands by default (see the module docstring).

    ``name`` contains ``KEY``, ``SECRET``, ``TOKEN``, ``PASSWORD`` or ``CREDENTIAL``, ends in
    ``_PAT`` or ``_DSN``, is ``OTEL_EXPORTER_OTLP_HEADERS`` (or a per-signal one), or
    ``value`` holds a URL with a password.
    """
    upper = name.upper()
    return (
        any(part in upper for part in SECRET_NAME_PARTS)
        or upper.endswith(SECRET_NAME_SUFFIXES)
        or upper in SECRET_NAMES
        or _SECRET_NAME_PATTERN.fullmatch(upper) is not None
        or _URL_WITH_PASSWORD.search(value) is not None
    )


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
        env = {name: value for name, value in source.items() if not looks_secret(name, value)}
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
