"""A small MCP server for ``toolbatch demo``: a project's tickets and CI log, over stdio.

Run it as ``python -m toolbatch.cli._demo_mcp_server``. It is written with the SDK's own
``MCPServer`` and needs nothing but the ``mcp`` package (no network, no ``npx``), so the
demo works on a fresh machine. Its answers are deterministic.

Tools:
    ``ticket(number)``: a short ticket from a fixed tracker (a few hundred characters).
    ``search_logs(pattern, max_lines=400)``: the matching lines of a synthetic CI log, one
    line per test; large on purpose (about 90 characters a line), so the finalizer has to
    share the turn's budget between it and the other calls.
"""

from __future__ import annotations

import os
import sys
from typing import Final

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["main"]

LOG_LINES: Final = 5_000
MAX_SEARCH_LINES: Final = 5_000

_TICKETS: Final = {
    101: (
        "Flaky test: test_upload_resumes fails about once in 40 runs on CI",
        "open",
        "The upload test times out when the mock server answers slowly. Suspect the 2 s "
        "read timeout; the CI log shows retries in module_0417.",
    ),
    102: (
        "Build prints too much: 5,000 lines per module",
        "open",
        "The compiler's verbose flag is on in CI. Nobody reads the output, but it fills "
        "the agent's context. Keep the full log as an artifact, show the tail.",
    ),
    103: (
        "Release 2.4 checklist",
        "closed",
        "Changelog written, wheels built, tag pushed.",
    ),
}

mcp = MCPServer("toolbatch-demo", version="1.0")


@mcp.tool()
def ticket(number: int) -> str:
    """Return one ticket of the project's tracker: title, state and description.

    Args:
        number: the ticket number (101 to 103).
    """
    found = _TICKETS.get(number)
    if found is None:
        raise ToolError(f"no ticket #{number}; the tracker holds {sorted(_TICKETS)}")
    title, state, body = found
    return f"#{number} [{state}] {title}\n\n{body}\n"


def _log_line(index: int) -> str:
    outcome = "FAILED (timeout after 2.0 s)" if index % 417 == 0 else "passed"
    return (
        f"2026-08-12T10:{index // 60 % 60:02d}:{index % 60:02d}Z ci[{index:05d}] "
        f"tests/module_{index:04d}.py::test_case_{index % 7} {outcome}"
    )


@mcp.tool()
def search_logs(pattern: str, max_lines: int = 400) -> str:
    """Return the lines of the latest CI log that contain ``pattern``.

    Args:
        pattern: the text to look for (case-sensitive), e.g. ``"passed"`` or ``"FAILED"``.
        max_lines: the most lines to return (1 to 5,000).
    """
    if not 1 <= max_lines <= MAX_SEARCH_LINES:
        raise ToolError(f"max_lines must be between 1 and {MAX_SEARCH_LINES}, got {max_lines}")
    hits = [line for i in range(1, LOG_LINES + 1) if pattern in (line := _log_line(i))]
    shown = hits[:max_lines]
    header = f"{len(hits)} of {LOG_LINES} log lines match {pattern!r}"
    if len(shown) < len(hits):
        header += f" (first {len(shown)} shown)"
    return header + "\n" + "\n".join(shown) + "\n"


def main() -> None:
    """Serve on stdio until the client closes stdin."""
    mcp.run()
    # The SDK's interpreter teardown takes most of a second and nothing is left to flush:
    # exit at once so the client's shutdown does not wait for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
