"""MCP start-up spans (the SDK's ``initialize`` and ``tools/list`` requests) join the
session's trace: children of the caller's span, never roots of their own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli._support import ECHO_MCP_SERVER, TOOLBATCH
from tests.telemetry.test_export import (
    REMOTE_SPAN,
    REMOTE_TRACE,
    TIMEOUT_S,
    Collector,
    _env,
    collector,
)

__all__ = ["collector"]  # the fixture, shared with test_export


def test_mcp_start_up_spans_are_in_the_callers_trace(collector: Collector, tmp_path: Path) -> None:
    """``toolbatch run`` under a TRACEPARENT: every span, MCP start-up included, is in it."""
    config = tmp_path / "mcp.json"
    entry = ECHO_MCP_SERVER  # which server answers is not the point: its start-up spans are
    config.write_text(json.dumps({"mcpServers": {"t": entry}}))
    batch = [{"id": "m", "name": "mcp__t__echo", "args": {"text": "hi"}}]
    done = subprocess.run(
        [*TOOLBATCH, "run", "-", "--mcp-config", str(config), "--artifacts-dir", str(tmp_path)],
        input=json.dumps(batch).encode(),
        capture_output=True,
        env=_env(collector, TRACEPARENT=f"00-{REMOTE_TRACE}-{REMOTE_SPAN}-01"),
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    spans = [span for _, span in collector.spans()]
    startup = [span for span in spans if "initialize" in span.name or "tools/list" in span.name]
    assert startup, sorted(span.name for span in spans)
    for span in spans:
        assert span.trace_id.hex() == REMOTE_TRACE, span.name
        assert span.parent_span_id, f"{span.name} is a root"
