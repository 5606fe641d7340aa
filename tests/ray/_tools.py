"""Registry factories the session hosts call (pickled by reference: hosts import this)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from toolbatch import Registry, default_registry, tool

MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"


@tool(read_only=True)
def host_pid() -> str:
    """The host process's pid."""
    return str(os.getpid())


@tool(read_only=True)
def where() -> str:
    """The host's working directory."""
    return os.getcwd()


def shell_and_pid(workspace: Path) -> Registry:
    """The shell (in the workspace) and ``host_pid``."""
    registry = default_registry(cwd=workspace)
    registry.register(host_pid)
    return registry


def mcp_document() -> dict[str, Any]:
    """The test MCP server on stdio, started on the session's host."""
    return {"mcpServers": {"tests": {"command": sys.executable, "args": [str(MCP_SERVER)]}}}
