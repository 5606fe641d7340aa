"""The names toolbatch's spans, attributes and metrics use, and where each comes from.

Sources (read for this module; all of them have Development status, so names may change):

* ``[GENAI-SPANS]`` open-telemetry/semantic-conventions-genai ``docs/gen-ai/gen-ai-spans.md``,
  "Execute tool span": name ``execute_tool {gen_ai.tool.name}``, kind ``INTERNAL``;
  ``gen_ai.operation.name`` (Required, set at span creation for sampling), ``gen_ai.tool.name``
  (Required), ``error.type`` (Conditionally Required on error, low cardinality, ``_OTHER`` as
  fallback), ``gen_ai.tool.call.id``, ``gen_ai.tool.description``, ``gen_ai.tool.type``
  (Recommended), ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` (Opt-In; the
  result only on success; JSON strings on spans). Content is not captured by default
  ("Capturing instructions, inputs, and outputs"); the span status follows "Recording
  Errors" (no status description that may hold sensitive details).
* ``[GENAI-METRICS]`` the same repository, ``docs/gen-ai/gen-ai-metrics.md``, "Generative
  AI tool metrics": ``gen_ai.execute_tool.duration``, a histogram in ``s`` with
  ``gen_ai.tool.name`` (Required), ``error.type``, ``gen_ai.tool.type``, the same value as
  the span's duration, and the bucket boundaries below.
* ``[MCP]`` the same repository, ``docs/gen-ai/mcp.md``: an MCP tool call is compatible with
  the execute_tool span, and when an outer GenAI instrumentation already traces the tool
  execution the MCP attributes go on that span (``mcp.method.name`` Required,
  ``mcp.protocol.version``, ``mcp.session.id``, ``network.transport`` = ``pipe`` for stdio
  and ``tcp`` for HTTP, ``server.address`` / ``server.port``; ``error.type`` = ``tool_error``
  when ``CallToolResult.isError``); the metric ``mcp.client.operation.duration`` with its
  bucket boundaries; trace context goes into ``params._meta`` under the unprefixed
  ``traceparent`` / ``tracestate`` / ``baggage`` keys (SEP-414).
* ``[ENV-CARRIERS]`` open-telemetry/opentelemetry-specification
  ``specification/context/env-carriers.md`` (Release Candidate): a TextMapPropagator with an
  environment carrier; keys normalised (uppercase, ``[^A-Za-z0-9_]`` -> ``_``, ``_`` before a
  leading digit), so W3C Trace Context travels as ``TRACEPARENT`` / ``TRACESTATE``; the parent
  copies its environment per child and injects into the copy.

Everything named ``toolbatch.*`` is toolbatch's own: the conventions have no batch, hook or
artifact concepts.
"""

from __future__ import annotations

from typing import Final

# -- spans ------------------------------------------------------------------------------

SPAN_TURN: Final = "toolbatch.turn"
"""One batch: ``execute`` plus ``complete_turn`` (the conventions define no batch span)."""
SPAN_HOOK: Final = "toolbatch.hook"
"""One hook run, named ``toolbatch.hook {event}`` (``toolbatch.hook PostToolBatch``)."""
SPAN_PERSIST: Final = "toolbatch.artifact.persist"
"""One artifact written to disk (a one-shot write, or a stream's commit)."""
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
"""[GENAI-SPANS] ``gen_ai.operation.name`` of a tool call; also the span name's prefix."""

# -- attributes of the conventions ------------------------------------------------------

GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
"""[GENAI-SPANS] Opt-In: only with content capture on."""
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
"""[GENAI-SPANS] Opt-In, and only when the call succeeded."""
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""[GENAI-SPANS] the conversation (session) id; set on the turn span from ``session_id``."""
ERROR_TYPE: Final = "error.type"
ERROR_TYPE_OTHER: Final = "_OTHER"
"""[GENAI-SPANS] the fallback ``error.type`` when a failure has no type of its own."""
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
NETWORK_TRANSPORT: Final = "network.transport"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
MCP_TOOL_ERROR: Final = "tool_error"
"""[MCP] ``error.type`` of a ``tools/call`` whose result has ``isError: true``."""

TOOL_TYPE_FUNCTION: Final = "function"
"""[GENAI-SPANS] ``gen_ai.tool.type`` of the shell and Python tools: toolbatch is the client
that executes the logic of a predefined function whose parameters the model generated."""
TOOL_TYPE_EXTENSION: Final = "extension"
"""[GENAI-SPANS] ``gen_ai.tool.type`` of MCP tools: executed by an external server the agent
bridges to."""

# -- toolbatch's own attributes ---------------------------------------------------------

CALL_STATUS: Final = "toolbatch.call.status"
"""How a call ended: ``success``, ``error``, ``timed_out``, ``denied``, ``cancelled``,
``duplicate`` or ``skipped`` (the response's status, with ``timed_out`` and ``denied`` told
apart from other errors by the response's error type)."""
CALL_CHARS: Final = "toolbatch.call.chars"
"""Code points of model-facing text the call produced (before the batch budget)."""
CALL_PERSISTED: Final = "toolbatch.call.persisted"
"""Whether the call's producer already wrote its complete output to an artifact."""
MCP_SERVER: Final = "toolbatch.mcp.server"
"""The server's name in the ``mcpServers`` document."""
MCP_TOOL: Final = "toolbatch.mcp.tool"
"""The tool's own name on its server (``gen_ai.tool.name`` is what the model called)."""

TURN_CALLS: Final = "toolbatch.turn.calls"
TURN_ERRORS: Final = "toolbatch.turn.errors"
TURN_BUDGET: Final = "toolbatch.turn.budget"
TURN_CHARS: Final = "toolbatch.turn.chars"
TURN_SLOTS_CUT: Final = "toolbatch.turn.slots_cut"
TURN_RESPONSES_CUT: Final = "toolbatch.turn.responses_cut"
TURN_ARTIFACTS: Final = "toolbatch.turn.artifacts.persisted"
TURN_ARTIFACT_BYTES: Final = "toolbatch.turn.artifacts.bytes"
TURN_ARTIFACT_FAILURES: Final = "toolbatch.turn.artifacts.failed"
TURN_HOOKS: Final = "toolbatch.turn.hooks.run"
TURN_HOOKS_FAILED: Final = "toolbatch.turn.hooks.failed"
TURN_HOOKS_CONTEXT: Final = "toolbatch.turn.hooks.context"
TURN_HOOKS_REPLACED: Final = "toolbatch.turn.hooks.replaced"
TURN_STOPPED: Final = "toolbatch.turn.stopped"
TURN_COMPLETED: Final = "toolbatch.turn.completed"
"""``False`` on a turn whose ``execute`` was never followed by ``complete_turn``."""

HOOK_EVENT: Final = "toolbatch.hook.event"
HOOK_NAME: Final = "toolbatch.hook.name"
HOOK_TYPE: Final = "toolbatch.hook.type"
HOOK_OUTCOME: Final = "toolbatch.hook.outcome"
"""``no_answer``, ``context``, ``stop``, ``replace`` or ``failed``."""

ARTIFACT_BYTES: Final = "toolbatch.artifact.bytes"
ARTIFACT_KIND: Final = "toolbatch.artifact.kind"
"""``text`` (``.txt``) or ``binary`` (anything else)."""
ARTIFACT_LOCATION: Final = "toolbatch.artifact.location"
"""``primary`` or ``fallback`` (the store's fallback directory)."""
ARTIFACT_STREAMED: Final = "toolbatch.artifact.streamed"
ARTIFACT_DROPPED_BYTES: Final = "toolbatch.artifact.dropped_bytes"
"""Bytes a stream could not keep (past the per-file or per-store cap)."""
ARTIFACT_REUSED: Final = "toolbatch.artifact.reused"

# -- metrics ----------------------------------------------------------------------------

METRIC_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
"""[GENAI-METRICS] histogram, s, by tool, tool type, error type and toolbatch's status."""
TOOL_DURATION_BUCKETS_S: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
METRIC_MCP_DURATION: Final = "mcp.client.operation.duration"
"""[MCP] histogram, s, of each ``tools/call`` request."""
MCP_DURATION_BUCKETS_S: Final = (
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
METRIC_OUTPUT_PRODUCED: Final = "toolbatch.tool.output.produced"
"""counter, ``{char}``: model-facing text the calls produced, by tool."""
METRIC_OUTPUT_SENT: Final = "toolbatch.tool.output.sent"
"""counter, ``{char}``: what the model received of it after the batch budget, by tool."""
METRIC_ARTIFACTS: Final = "toolbatch.artifacts.persisted"
"""counter, ``{artifact}``: artifacts written (reused ones are not counted again)."""
METRIC_ARTIFACT_BYTES: Final = "toolbatch.artifacts.written"
"""counter, ``By``: bytes written to artifacts."""
METRIC_ARTIFACT_FAILURES: Final = "toolbatch.artifacts.failed"
"""counter, ``{failure}``: artifacts that could not be written, by ``error.type``."""
METRIC_HOOK_DURATION: Final = "toolbatch.hook.duration"
"""histogram, s, by hook event, type and outcome."""
HOOK_DURATION_BUCKETS_S: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

# -- switches ---------------------------------------------------------------------------

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""[GENAI-SPANS] the opt-in switch the conventions name for content capture. ``true``,
``SPAN_ONLY`` and ``SPAN_AND_EVENT`` turn it on (toolbatch records no events)."""
CAPTURE_CONTENT_ON: Final = frozenset({"true", "span_only", "span_and_event"})
