"""OpenTelemetry spans and metrics for every batch, call, hook and persisted artifact.

Only the OpenTelemetry API is used (``toolbatch[otel]``); with no SDK configured, or with
OpenTelemetry not installed, everything here is a no-op. What is emitted, the conventions it
follows and the switches are in ``toolbatch/telemetry/README.md``.

For programs: :func:`configure` (providers, content capture, off switch) and
:func:`export_from_environment` (OTLP from the standard ``OTEL_*`` variables, what the
command line uses). The other names are the instrumentation points toolbatch's own
packages call (the scheduler, the hooks runner, the artifact store, the shell, MCP).
"""

from toolbatch.telemetry._artifacts import (
    traced_commit as traced_commit,
    traced_persist as traced_persist,
)
from toolbatch.telemetry._carriers import (
    child_environment as child_environment,
    environment_key as environment_key,
)
from toolbatch.telemetry._export import OtlpExport as OtlpExport, export_from_environment
from toolbatch.telemetry._hooks import (
    HookKind as HookKind,
    HookTelemetry as HookTelemetry,
    trace_hook as trace_hook,
)
from toolbatch.telemetry._mcp import (
    McpCallTelemetry as McpCallTelemetry,
    trace_mcp_call as trace_mcp_call,
)
from toolbatch.telemetry._runtime import capture_content, configure
from toolbatch.telemetry._turn import (
    CallTelemetry as CallTelemetry,
    TurnTelemetry as TurnTelemetry,
    begin_turn as begin_turn,
    call_scope as call_scope,
    current_call as current_call,
    current_turn as current_turn,
    note_cuts as note_cuts,
)

__all__ = [
    "capture_content",
    "configure",
    "export_from_environment",
]
