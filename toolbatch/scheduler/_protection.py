"""The paths a session keeps read-only from the model's commands: what the host reads or runs.

Beside ``PROTECTED_NAMES`` in every workspace root (``toolbatch.sandbox``), a session protects
the settings and MCP files it read, every command hook's and stdio MCP server's script (and a
server's ``envFile``), the artifact directories, and ``SchedulerConfig(protected_paths=...)``
(``--protect``; ``toolbatch run`` adds the recording and its other outputs).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from toolbatch.hooks import CommandHook
from toolbatch.sandbox import command_scripts

if TYPE_CHECKING:
    from toolbatch.scheduler._config import SchedulerConfig

__all__ = ["session_protected_paths"]


def _command_hooks(config: SchedulerConfig) -> Iterable[CommandHook]:
    for hook in config.event_hooks():
        if isinstance(hook.hook, CommandHook):
            yield hook.hook
    for plain in config.post_tool_batch_hooks():
        if isinstance(plain, CommandHook):
            yield plain


def session_protected_paths(config: SchedulerConfig, artifact_dirs: Iterable[Path]) -> list[Path]:
    """Every path the session keeps read-only beneath the writable roots (module docstring)."""
    paths = [Path(path) for path in config.protected_paths]
    settings = config.loaded_settings.sources
    paths.extend(Path(source) for source in settings if os.path.isfile(source))
    if isinstance(config.mcp_servers, str | os.PathLike):
        paths.append(Path(config.mcp_servers))
    for hook in _command_hooks(config):
        paths.extend(hook.pins.paths)
    mcp = config.mcp_config()
    if mcp is not None:
        for server in mcp.servers.values():
            if server.type != "stdio":
                continue  # an HTTP server: nothing of it runs here
            paths.extend(
                command_scripts([server.command, *server.args], cwd=server.cwd, env=server.env)
            )
            if server.env_file is not None:
                base = Path(server.cwd) if server.cwd is not None else Path.cwd()
                paths.append(base / server.env_file)
    paths.extend(artifact_dirs)
    return [path.absolute() for path in dict.fromkeys(paths)]
