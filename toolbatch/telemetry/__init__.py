"""OpenTelemetry spans and metrics for every batch, call, hook and persisted artifact.

Only the OpenTelemetry API is used (``toolbatch[otel]``); with no SDK configured, or with
OpenTelemetry not installed, everything here is a no-op. What is emitted, the conventions it
follows and the switches are in ``toolbatch/telemetry/README.md``.

For programs: :func:`configure` (providers, content capture, off switch) and
:func:`export_from_environment` (OTLP from the standard ``OTEL_*`` variables, what the
command line uses). The other names are the instrumentation points toolbatch's own
packages call (the scheduler, the hooks runner, the artifact store, the shell, MCP).
"""

from toolbatch.telemetry._artifacts import traced_commit, traced_persist
from toolbatch.telemetry._carriers import child_environment, environment_key
from toolbatch.telemetry._export import OtlpExport, export_from_environment
from toolbatch.telemetry._hooks import HookKind, HookTelemetry, trace_hook
from toolbatch.telemetry._mcp import McpCallTelemetry, trace_mcp_call
from toolbatch.telemetry._runtime import capture_content, configure
from toolbatch.telemetry._turn import (
    CallTelemetry,
    TurnTelemetry,
    begin_turn,
    call_scope,
    current_call,
    current_turn,
    note_cuts,
)

__all__ = [
    "CallTelemetry",
    "HookKind",
    "HookTelemetry",
    "McpCallTelemetry",
    "OtlpExport",
    "TurnTelemetry",
    "begin_turn",
    "call_scope",
    "capture_content",
    "child_environment",
    "configure",
    "current_call",
    "current_turn",
    "environment_key",
    "export_from_environment",
    "note_cuts",
    "trace_hook",
    "trace_mcp_call",
    "traced_commit",
    "traced_persist",
]
