"""Transports: JSON-string byte accounting and projection, headless output, ACP display.

What a transport shows is bounded here, after the model-facing response is final: these
functions read responses and never change what the model receives or what is recorded.
"""

from ._acp_projection import ACP_MARKER, ACP_TOOL_RESULT_JSON_BYTES, project_acp_update
from ._headless import (
    DUAL_OUTPUT_PROTOCOL_VERSION,
    OutputAdapter,
    OutputFormat,
    dumps_json_line,
    make_output_adapter,
    tool_result_content,
)
from ._json_string import (
    HEADLESS_MARKER,
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    json_string_bytes,
    project_json_string,
)

__all__ = [
    "ACP_MARKER",
    "ACP_TOOL_RESULT_JSON_BYTES",
    "DUAL_OUTPUT_PROTOCOL_VERSION",
    "HEADLESS_MARKER",
    "HEADLESS_TOOL_RESULT_JSON_BYTES",
    "OutputAdapter",
    "OutputFormat",
    "dumps_json_line",
    "json_string_bytes",
    "make_output_adapter",
    "project_acp_update",
    "project_json_string",
    "tool_result_content",
]
