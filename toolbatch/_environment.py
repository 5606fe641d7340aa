"""The environment handed to processes toolbatch starts on the agent's behalf.

Command hooks and MCP servers get only this documented default environment plus what their
own configuration names, never the agent's whole environment (which may hold API keys).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

__all__ = ["DEFAULT_INHERITED_ENV_VARS", "minimal_environment"]

DEFAULT_INHERITED_ENV_VARS: Final = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "SYSTEMROOT",
    "TEMP",
    "TERM",
    "TMP",
    "TMPDIR",
    "TZ",
    "USER",
)
"""Variables copied from the agent's environment when they are set."""


def minimal_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The default variables from ``os.environ`` plus ``extra`` (which wins)."""
    env = {name: os.environ[name] for name in DEFAULT_INHERITED_ENV_VARS if name in os.environ}
    env.setdefault("PATH", os.defpath)
    if extra:
        env.update(extra)
    return env
