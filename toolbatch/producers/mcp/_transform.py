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

A text part longer than the trigger (500,000 characters, as Qwen Code's MCP tool) is
written once to the artifact store and replaced in the model response by a preview of
about 2,000 characters that names the file, in the one preview format (``toolbatch._core._preview``:
head and tail). ``persisted_output_files`` lists every file
written for the call when every shortened part was saved, is ``()`` when any part was
shortened without a file (listed files must hold all the text the model does not see), and
``None`` when nothing was shortened. The display keeps the full transformed result.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
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
from toolbatch.artifacts import ArtifactStore
from toolbatch.errors import ArtifactError
from toolbatch.producers._binary import persist_binary

__all__ = [
    "DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS",
    "DEFAULT_PREVIEW_CHARS",
    "transform_result",
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
    shortened: bool
    files: list[Path]
    unsaved: int = 0
    previews: list[Preview] = field(default_factory=list)


def _media_part(block: types.ImageContent | types.AudioContent) -> InlineDataPart:
    return InlineDataPart.model_construct(
        inline_data=InlineData.model_construct(mime_type=block.mime_type, data=block.data)
    )


def _describe_link(block: types.ResourceLink) -> str:
    details = [block.mime_type or "", f"{block.size:,} bytes" if block.size is not None else ""]
    extra = ", ".join(detail for detail in details if detail)
    text = f"[Resource link: {block.name} <{block.uri}>{f' ({extra})' if extra else ''}]"
    if block.description:
        text += f" {block.description}"
    return text


async def _describe_resource(
    block: types.EmbeddedResource, *, call: ToolCall, store: ArtifactStore | None
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
    saved = await persist_binary(data, call=call, store=store, suffix=suffix)
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
    log: Any,
) -> _Bounded:
    bounded = _Bounded(texts=[], shortened=False, files=[])
    for text in texts:
        if len(text) <= trigger_chars:
            bounded.texts.append(text)
            continue
        bounded.shortened = True
        path: Path | None = None
        notes: tuple[str, ...] = ()
        if store is None:
            notes = (unsaved_note("no artifact store is configured"),)
        else:
            try:
                path = await store.persist(call.id, call.name, text)
            except ArtifactError as exc:
                log.warning("mcp.persist_failed", chars=len(text), error=str(exc))
                notes = (unsaved_note(str(exc)),)
        if path is None:
            bounded.unsaved += 1
        elif path not in bounded.files:
            bounded.files.append(path)
        if len(text) <= preview_chars:
            bounded.texts.append(text)  # over the trigger, within the preview: shown whole
            continue
        source = Excerpt(text, text, len(text), notes=notes)
        paths = [str(path)] if path is not None else []
        preview = make_preview(source, preview_chars, paths=paths)
        bounded.previews.append(preview)
        bounded.texts.append(preview.text)
    return bounded


async def transform_result(
    result: types.CallToolResult,
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    trigger_chars: int = DEFAULT_LARGE_OUTPUT_TRIGGER_CHARS,
    preview_chars: int = DEFAULT_PREVIEW_CHARS,
    log: Any = None,
) -> ToolResult:
    """The ``ToolResult`` for one MCP tool result (see the module docstring).

    Args:
        result: what the server returned.
        call: the call it answers (its id and name name the artifacts).
        store: where over-long text parts are written (``None``: shortened without a file).
        trigger_chars: text parts longer than this are persisted and previewed.
        preview_chars: how much of such a part the model sees.
        log: a structlog logger bound to the call.
    """
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
            texts.append(await _describe_resource(block, call=call, store=store))
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
        log=log,
    )
    display: dict[str, JsonValue] = {"text": "\n".join(texts)}
    if display_media:
        display["media"] = display_media
    if structured is not None:
        display["structuredContent"] = structured
    if result.is_error:
        display["isError"] = True
    # Listed files must hold every text the model does not see: when one shortened part
    # could not be saved, the response is decided without a complete file.
    persisted: tuple[Path, ...] | None = None
    if bounded.shortened:
        persisted = () if bounded.unsaved else tuple(bounded.files)
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
    content: list[Part] = [TextPart.model_construct(text=text) for text in bounded.texts]
    content.extend(media)
    # The finalizer can shorten the preview from what it kept when it is the whole output.
    preview = bounded.previews[0] if len(bounded.texts) == 1 and bounded.previews else None
    return ToolResult.model_construct(
        content=content,
        display=display,
        error=None,
        persisted_output_files=persisted,
        preview=preview,
    )
