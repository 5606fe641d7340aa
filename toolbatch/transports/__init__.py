"""Transports: JSON-string byte accounting and projection, headless output, ACP display.

What a transport shows is bounded here, after the model-facing response is final: these
functions read responses and never change what the model receives or what is recorded.

What a person is shown of a response is ``display_text``: a string ``display`` as is, the
``text`` of a display object that has one (an MCP result's display is ``{"text", "media",
"structuredContent", "isError"}``: people see its text, programs reading ``display`` whole
get the rest), else JSON of the display, the error or the model text. Media are shown from
the response's ``inlineData`` parts: as image and audio blocks in ACP, as one line each in
headless output.
"""

from toolbatch.transports._acp_projection import (
    ACP_MARKER as ACP_MARKER,
    ACP_MEDIA_JSON_BYTES as ACP_MEDIA_JSON_BYTES,
    ACP_TOOL_RESULT_JSON_BYTES as ACP_TOOL_RESULT_JSON_BYTES,
    project_acp_update,
)
from toolbatch.transports._display import (
    display_text as display_text,
    tool_result_content as tool_result_content,
)
from toolbatch.transports._headless import (
    DUAL_OUTPUT_PROTOCOL_VERSION as DUAL_OUTPUT_PROTOCOL_VERSION,
    OutputAdapter as OutputAdapter,
    OutputFormat as OutputFormat,
    ProgressStatus as ProgressStatus,
    make_output_adapter as make_output_adapter,
)
from toolbatch.transports._json_string import (
    HEADLESS_MARKER as HEADLESS_MARKER,
    HEADLESS_TOOL_RESULT_JSON_BYTES as HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line as dumps_json_line,
    json_string_bytes as json_string_bytes,
    project_json_string as project_json_string,
)

__all__ = [
    "project_acp_update",
]
