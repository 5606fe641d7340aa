"""From an MCP ``CallToolResult`` to a toolbatch ``ToolResult``.

* text content becomes the function response's ``output`` (parts joined by newlines);
* image and audio content become ``inlineData`` parts, which the finalizer never counts or
  changes;
* an embedded text resource becomes a one-line description plus its text; an embedded
  binary resource (a base64 ``blob``) is decoded and persisted once as a binary artifact
  (named by its MIME type or magic number: ``.png``, ``.pdf``, ... else ``.bin``) and
  described with its size and path, like binary shell output; a resource link becomes a
  one-line description;
* ``structuredContent`` is kept for display (and is the output when there is no content);
* ``isError`` makes an error result whose message is the server's text.

When a text part is longer than the trigger (500,000 characters, as Qwen Code's MCP
tool), the whole text output (every text part, joined by newlines as the model gets them)
is written once to the artifact store and replaced in the model response by one preview of
about 2,000 characters that names the file, in the one preview format
(``toolbatch._core._preview``: one header, head and tail). ``persisted_output_files`` is
that file when it was written (it holds everything a later cut could remove), ``()`` when
the output was shortened without a file (no store, a failed write, or the persistence
deadline passed: the preview says so), and ``None`` when nothing was shortened. The
display keeps the full transformed result.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio.to_thread
import mcp_types as types
import structlog
from pydantic import JsonValue

from toolbatch._core import (
    Excerpt,
    InlineData,
    InlineDataPart,
    Part,
    Preview,
    TextPart,
    ToolCall,
    ToolResult,
    base64_decoded_size,
    make_preview,
    sniff_media,
    suffix_for_mime,
    unsaved_note,
)
from toolbatch.artifacts import ArtifactStore, persist_within
from toolbatch.producers._binary import persist_binary

__all__ = [
    "DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS",
    "DEFAULT_PREVIEW_CHARS",
    "transform_result",
    "transform_text_result",
]

_log = structlog.get_logger("toolbatch.mcp")

DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS: Final = 500_000
"""A text part longer than this is persisted and previewed."""
DEFAULT_PREVIEW_CHARS: Final = 2_000
"""The size of a persisted text part's preview in the model response (head and tail)."""
RESOURCE_TEXT_PREVIEW_CHARS: Final = 200
INLINE_DECODE_CHARS: Final = 1 * 2**20
"""Base64 blobs up to this long are decoded on the event loop; longer ones in a thread."""


@dataclass(slots=True)
class _Bounded:
    texts: list[str]
    persisted: tuple[Path, ...] | None = None
    preview: Preview | None = None


def _media_part(block: types.ImageContent | types.AudioContent) -> InlineDataPart:
    return InlineDataPart(inline_data=InlineData(mime_type=block.mime_type, data=block.data))


def _describe_link(block: types.ResourceLink) -> str:
    details = [block.mime_type or "", f"{block.size:,} bytes" if block.size is not None else ""]
    extra = ", ".join(detail for detail in details if detail)
    text = f"[Resource link: {block.name} <{block.uri}>{f' ({extra})' if extra else ''}]"
    if block.description:
        text += f" {block.description}"
    return text


async def _describe_resource(
    block: types.EmbeddedResource,
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    persist_deadline: float | None,
) -> str:
    """The resource's text for the model (a binary one is saved first)."""
    resource = block.resource
    mime = f" ({resource.mime_type})" if resource.mime_type else ""
    if isinstance(resource, types.TextResourceContents):
        return f"[Resource <{resource.uri}>{mime}]\n{resource.text}"
    try:
        data = await _decode_base64(resource.blob)
    except ValueError:
        size = base64_decoded_size(resource.blob)
        return f"[Resource <{resource.uri}>{mime}: {size:,} bytes of bad base64, not kept]"
    sniffed = sniff_media(data)
    suffix = suffix_for_mime(resource.mime_type)
    if suffix == ".bin" and sniffed is not None:
        suffix = sniffed.suffix
    saved = await persist_binary(
        data, call=call, store=store, suffix=suffix, deadline=persist_deadline
    )
    text = f"[Resource <{resource.uri}>{mime}: {len(data):,} bytes of binary data, not shown; "
    return f"{text}{saved.where()}]"


async def _decode_base64(blob: str) -> bytes:
    if len(blob) <= INLINE_DECODE_CHARS:
        return base64.b64decode(blob, validate=False)
    return await anyio.to_thread.run_sync(base64.b64decode, blob)


async def _bound_texts(
    texts: list[str],
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    trigger_chars: int,
    preview_chars: int,
    persist_deadline: float | None,
    log: Any,
) -> _Bounded:
    """The texts the model gets: all of them, or one preview of them all.

    When any text part is over the trigger, the whole output (every text part, joined as
    the model would get them) is written to one file and previewed once, with one header:
    a file that held only the long parts would lack what a later cut removes from the
    others, and a preview per part would put several headers in one result.
    """
    if all(len(text) <= trigger_chars for text in texts):
        return _Bounded(texts=texts)
    output = "\n".join(texts)
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = (unsaved_note("no artifact store is configured"),)
    if store is not None:
        saved = await persist_within(store, call.id, call.name, output, deadline=persist_deadline)
        if isinstance(saved, Path):
            files, notes = (saved,), ()
        else:
            log.warning("mcp.persist_failed", chars=len(output), error=saved)
            notes = (unsaved_note(saved),)
    if len(output) <= preview_chars:  # over the trigger, within the preview: shown whole
        return _Bounded(texts=[output], persisted=files)
    preview = make_preview(
        Excerpt(output, output, len(output), notes=notes),
        preview_chars,
        paths=[str(path) for path in files],
    )
    return _Bounded(texts=[preview.text], persisted=files, preview=preview)


def transform_text_result(result: types.CallToolResult, *, trigger_chars: int) -> ToolResult | None:
    """``transform_result`` of the common result, without awaiting: one text part within
    the trigger, not an error (``None`` for any other result)."""
    content = result.content
    if result.is_error or len(content) != 1:
        return None
    block = content[0]
    if not isinstance(block, types.TextContent) or len(block.text) > trigger_chars:
        return None
    text = block.text
    display: dict[str, JsonValue] = {"text": text}
    structured = result.structured_content
    if structured is not None:
        display["structuredContent"] = structured
    return ToolResult(
        content=[TextPart(text=text)],
        display=display,
        error=None,
        persisted_output_files=None,
        preview=None,
    )


async def transform_result(
    result: types.CallToolResult,
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    trigger_chars: int = DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    persist_deadline: float | None = None,
    log: Any = None,
) -> ToolResult:
    """The ``ToolResult`` for one MCP tool result (see the module docstring).

    Args:
        result: what the server returned.
        call: the call it answers (its id and name name the artifacts).
        store: where over-long text parts are written (``None``: shortened without a file).
        trigger_chars: text parts longer than this are persisted and previewed.
        preview_chars: how much of such output the model sees.
        persist_deadline: when to stop waiting for the artifact (on the anyio clock;
            ``None``: ``DEFAULT_PERSIST_TIMEOUT_S`` from when it starts); past it the
            preview says the output was not saved.
        log: a structlog logger bound to the call.
    """
    plain = transform_text_result(result, trigger_chars=trigger_chars)
    if plain is not None:
        return plain
    if log is None:
        log = _log
    texts: list[str] = []
    media: list[Part] = []
    display_media: list[JsonValue] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            media.append(_media_part(block))
            size = base64_decoded_size(block.data)
            display_media.append({"type": block.type, "mimeType": block.mime_type, "bytes": size})
        elif isinstance(block, types.EmbeddedResource):
            described = await _describe_resource(
                block, call=call, store=store, persist_deadline=persist_deadline
            )
            texts.append(described)
        elif isinstance(block, types.ResourceLink):
            texts.append(_describe_link(block))
        else:  # a content type newer than this client
            texts.append(f"[Unsupported MCP content of type {getattr(block, 'type', '?')!r}]")
    structured = result.structured_content
    if not texts and not media and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    bounded = await _bound_texts(
        texts,
        call=call,
        store=store,
        trigger_chars=trigger_chars,
        preview_chars=preview_chars,
        persist_deadline=persist_deadline,
        log=log,
    )
    display: dict[str, JsonValue] = {"text": "\n".join(texts)}
    if display_media:
        display["media"] = display_media
    if structured is not None:
        display["structuredContent"] = structured
    if result.is_error:
        display["isError"] = True
    persisted = bounded.persisted
    if result.is_error:
        message = "\n".join(bounded.texts) or f"MCP tool {call.name!r} failed without a message"
        failed = ToolResult.failure(message, type="mcp_tool_error")
        return failed.model_copy(
            update={
                "content": media,
                "display": display,
                "persisted_output_files": persisted,
            }
        )
    content: list[Part] = [TextPart(text=text) for text in bounded.texts]
    content.extend(media)
    # The finalizer shortens the preview from what it kept, under the same one header.
    return ToolResult(
        content=content,
        display=display,
        error=None,
        persisted_output_files=persisted,
        preview=bounded.preview,
    )
