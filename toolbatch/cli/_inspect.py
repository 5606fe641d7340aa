"""``toolbatch tools`` and ``toolbatch artifacts show``: what a configuration offers, and
what a session kept.

``toolbatch tools [runtime flags] [--json]``
    Opens the configuration the runtime flags describe (``--mcp-config``, ``--settings``,
    ...), waits for its MCP servers (each within its start-up timeout) and lists every tool
    the model would be offered: its name, where it comes from (``built-in`` or
    ``mcp:<server>``) and its description's first line. Servers that could not start are
    listed after, with why. ``--json``: one object, ``{"tools": [{"name", "source",
    "description"}], "mcp_servers": [{"name", "status", "error"}]}``.

``toolbatch artifacts show <session | call | path>``
    A session id (``toolbatch artifacts list``): its files, one a line (name, size). A call
    id: the complete output kept for that call, written to stdout as it is (several files:
    their list). A path: that file, as it is. Nothing found exits 1 with the places looked.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any, BinaryIO, Final, TextIO

from toolbatch.artifacts import list_sessions, safe_name_component, sessions_dir
from toolbatch.errors import ToolbatchError
from toolbatch.scheduler import SchedulerConfig, ToolScheduler, default_registry

__all__ = ["NotFound", "list_tools", "show_artifact", "stdout_bytes"]

DESCRIPTION_CHARS: Final = 100
"""The longest description shown in the text listing (the first line, cut)."""


class NotFound(ToolbatchError):
    """``artifacts show`` found nothing by that name (exit code 1, not a usage error)."""


def _source(scheduler: ToolScheduler, name: str) -> str:
    producer = scheduler.producer(name)
    server = getattr(producer, "server", None)
    return f"mcp:{server}" if isinstance(server, str) else "built-in"


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= DESCRIPTION_CHARS else line[: DESCRIPTION_CHARS - 1] + "…"


async def list_tools(config: SchedulerConfig, out: TextIO, *, as_json: bool) -> None:
    """Write the tools ``config`` offers (see the module docstring)."""
    async with ToolScheduler(default_registry(), config) as scheduler:
        declarations = await scheduler.wait_for_tools()
        tools = [
            {"name": d.name, "source": _source(scheduler, d.name), "description": d.description}
            for d in declarations
        ]
        servers: list[dict[str, Any]] = []
        mcp = scheduler.mcp_servers
        if mcp is not None:
            failures = mcp.failures
            for name, status in mcp.statuses().items():
                error = failures.get(name)
                servers.append(
                    {"name": name, "status": status, "error": None if error is None else str(error)}
                )
    if as_json:
        out.write(json.dumps({"tools": tools, "mcp_servers": servers}, ensure_ascii=False) + "\n")
        return
    width = max((len(tool["name"]) for tool in tools), default=4)
    source_width = max((len(tool["source"]) for tool in tools), default=6)
    for tool in tools:
        line = (
            f"{tool['name']:<{width}}  {tool['source']:<{source_width}}  "
            f"{_first_line(tool['description'])}"
        )
        out.write(line.rstrip() + "\n")
    for server in servers:
        if server["status"] != "connected":
            why = f": {server['error']}" if server["error"] else ""
            out.write(f"MCP server {server['name']!r}: {server['status']}{why}\n")


def show_artifact(what: str, out: TextIO, out_bytes: BinaryIO | None = None) -> None:
    """Write what ``what`` names (see the module docstring).

    Raises:
        NotFound: no session, call or file by that name.
    """
    root = sessions_dir(create=False)
    path = Path(what).expanduser()
    if path.is_file():
        _copy(path, out, out_bytes)
        return
    sessions = list_sessions()
    for session in sessions:
        if session.id == what:
            files = sorted(
                entry
                for entry in session.path.iterdir()
                if entry.is_file() and not entry.name.startswith(".")  # the lock, parts
            )
            out.write(f"{session.path}: {len(files)} file(s)\n")
            for entry in files:
                out.write(f"  {entry.name}  {entry.stat().st_size:,} B\n")
            return
    # Artifact names are <tool>-<safe call id>-<digest>.<suffix>.
    marker = f"-{safe_name_component(what)}-"
    found = [
        entry
        for session in sessions
        for entry in sorted(session.path.iterdir())
        if entry.is_file() and marker in entry.name and not entry.name.startswith(".")
    ]
    if len(found) == 1:
        _copy(found[0], out, out_bytes)
        return
    if found:
        out.write(f"{len(found)} artifacts of call {what!r}:\n")
        for entry in found:
            out.write(f"  {entry}  {entry.stat().st_size:,} B\n")
        return
    raise NotFound(
        f"no artifact session, call or file named {what!r} (looked in {root}: "
        f"{len(sessions)} session(s)); see toolbatch artifacts list, or pass the path a "
        f"tool result named (an --artifacts-dir file works too)"
    )


def _copy(path: Path, out: TextIO, out_bytes: BinaryIO | None) -> None:
    """The file's bytes to stdout unchanged (text through ``out`` when no binary stream)."""
    with open(path, "rb") as source:
        if out_bytes is None:
            out.write(source.read().decode("utf-8", "replace"))
            return
        out.flush()
        shutil.copyfileobj(source, out_bytes)
        out_bytes.flush()


def stdout_bytes() -> BinaryIO | None:
    """The binary stdout of this process (``None`` when stdout is a text-only stream)."""
    buffer = getattr(sys.stdout, "buffer", None)
    return buffer if isinstance(buffer, io.BufferedIOBase) else None  # type: ignore[return-value]
