"""What a person is shown of a response: its display text, then a line per media part.

Transports show people the response's ``display`` value, not what the model receives:
``display_text`` picks it (or falls back to the error, then the model-facing text), and
``tool_result_content`` adds one line per media part. Headless events, ACP updates and
``toolbatch demo`` all show this; each bounds it for its own wire.
"""

from __future__ import annotations

import json

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    TextPart,
    ToolCallResponse,
    base64_decoded_size,
)

__all__ = ["display_text", "media_lines", "tool_result_content"]


def display_text(response: ToolCallResponse) -> str:
    """What a person is shown of ``response``, unbounded (media aside).

    ``display`` when it is a non-blank string; the ``text`` of a display object whose
    ``text`` is a string (an MCP result's ``{"text", "media", "structuredContent",
    "isError"}``); a JSON rendering of any other non-null ``display``; the error message of
    a failed response; else the model-facing text (``output`` and ``error`` of function
    responses and top-level text, one per line).
    """
    display = response.display
    if isinstance(display, str):
        if display.strip():
            return display
    elif isinstance(display, dict) and isinstance(text := display.get("text"), str):
        if text.strip() or not response.error:
            return text
    elif display is not None:
        return json.dumps(display, ensure_ascii=False)
    if response.error:
        return response.error
    texts: list[str] = []
    for part in response.parts:
        if isinstance(part, FunctionResponsePart):
            body = part.function_response.response
            for key in ("error", "output"):
                value = body.get(key)
                if isinstance(value, str):
                    texts.append(value)
                elif value is not None:
                    texts.append(json.dumps(value, ensure_ascii=False))
        elif isinstance(part, TextPart):
            texts.append(part.text)
    return "\n".join(texts)


def media_lines(response: ToolCallResponse) -> list[str]:
    """One line per media part of ``response``: ``[image/png image, 4,033 bytes]``."""
    lines = []
    for part in response.parts:
        if isinstance(part, InlineDataPart):
            data = part.inline_data
            kind = data.mime_type.split("/", 1)[0]
            lines.append(f"[{data.mime_type} {kind}, {base64_decoded_size(data.data):,} bytes]")
        elif isinstance(part, FileDataPart):
            lines.append(f"[{part.file_data.mime_type} file: {part.file_data.file_uri}]")
    return lines


def tool_result_content(response: ToolCallResponse) -> str:
    """What headless events show of ``response``, unbounded: its ``display_text``, then a
    line per media part."""
    text = display_text(response)
    media = media_lines(response)
    return "\n".join([text, *media]) if text else "\n".join(media)
