"""Generic persistence: a custom tool's oversized output is persisted once and previewed.

Shell and MCP bound their own output; every other producer's output passes through
``apply_output_threshold``. Over the threshold the complete text goes to the artifact store
(the store falls back to its fallback directory by itself) and the model gets a preview of
about 2,000 characters in the one preview format (``toolbatch._core._preview``: head and tail,
naming the path actually written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import structlog

from toolbatch._core import (
    Excerpt,
    FunctionResponsePart,
    Part,
    TextPart,
    ToolCall,
    ToolResult,
    make_preview,
    unsaved_note,
)
from toolbatch.artifacts import ArtifactStore, persist_within

__all__ = ["GENERIC_PREVIEW_CHARS", "apply_output_threshold"]

log = structlog.get_logger("toolbatch.producers.generic")

GENERIC_PREVIEW_CHARS: Final = 2_000
"""Characters of output shown to the model when a generic tool's output is persisted."""


def _model_text(result: ToolResult) -> tuple[str, list[Part]] | None:
    """The result's text and its non-text parts, or None if it holds function responses."""
    if isinstance(result.content, str):
        return result.content, []
    texts: list[str] = []
    others: list[Part] = []
    for part in result.content:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, FunctionResponsePart):
            return None
        else:
            others.append(part)
    return "\n".join(texts), others


async def apply_output_threshold(
    result: ToolResult,
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    threshold: int | None,
    preview_chars: int = GENERIC_PREVIEW_CHARS,
    deadline: float | None = None,
) -> ToolResult:
    """Persist and preview ``result``'s text when it is longer than ``threshold``.

    A result whose producer already decided (``persisted_output_files`` is not ``None``),
    or whose text fits, is returned unchanged. Otherwise: ``(path,)`` when the store wrote
    the text, ``()`` when there is no store, it failed or it was not done by the persist
    deadline (the preview then says so). ``deadline`` is the call's own (anyio clock): the
    persist gives up a little before it, so a finished call is answered with its preview
    rather than as timed out.
    """
    if threshold is None or result.persisted_output_files is not None:
        return result
    extracted = _model_text(result)
    if extracted is None:
        return result
    text, media = extracted
    if len(text) <= threshold:
        return result
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = (unsaved_note("no artifact store is configured"),)
    if store is not None:
        saved = await persist_within(store, call.id, call.name, text, deadline=deadline)
        if isinstance(saved, Path):
            files, notes = (saved,), ()
        else:
            log.warning("generic.persist_failed", call_id=call.id, tool=call.name, error=saved)
            notes = (unsaved_note(saved),)
    if len(text) <= preview_chars:
        # Over the threshold but within the preview: shown whole, kept in the file as well.
        return result.model_copy(update={"persisted_output_files": files})
    source = Excerpt(text, text, len(text), notes=notes)
    made = make_preview(source, preview_chars, paths=[str(path) for path in files])
    preview = made.text
    content: str | list[Part] = preview if not media else [TextPart(text=preview), *media]
    display = result.display
    if display is None:
        display = preview
    return result.model_copy(
        update={
            "content": content,
            "display": display,
            "persisted_output_files": files,
            "preview": made,
        }
    )
