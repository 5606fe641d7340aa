"""The environment handed to processes toolbatch starts on the agent's behalf.

Command hooks and MCP stdio servers get only this documented default environment plus what
their own configuration names, never the agent's whole environment (which may hold API
keys). The shell tool is different: it runs the model's commands as the user, so it
inherits the agent's environment unless configured otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

__all__ = ["DEFAULT_INHERITED_ENV_VARS", "minimal_environment"]

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
