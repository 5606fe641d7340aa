"""The finalizer's media pass: check a batch's media parts once, save or replace them.

Real media stays inline and is saved once; text labelled as media becomes text; other
binary, and media over the per-part cap, are saved and replaced by a text reference naming
the file (see ``_media`` for the checks themselves).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import structlog

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCallResponse,
    media_type_problem,
    replace_fields,
)
from toolbatch.finalize._media import (
    MediaVerdict,
    check_media,
    describe_bytes,
    file_data_problem,
    media_suffix,
)
from toolbatch.finalize._slots import FinalizeState, state_of
from toolbatch.finalize._writer import Writer

log = structlog.get_logger("toolbatch.finalize")

_THREAD_DECODE_CHARS: Final = 1 * 2**20
"""Media data longer than this is decoded in a worker thread."""


def _media_checked(response: ToolCallResponse) -> bool:
    state = state_of(response.finalize_state)
    return state is not None and state.media_checked


async def _verdict(part: InlineDataPart, max_bytes: int) -> MediaVerdict:
    data = part.inline_data
    if len(data.data) <= _THREAD_DECODE_CHARS:
        return check_media(data.mime_type, data.data, max_bytes=max_bytes)
    return await anyio.to_thread.run_sync(
        lambda: check_media(data.mime_type, data.data, max_bytes=max_bytes)
    )


def _attach(parts: list[Part], text: str) -> None:
    """Give ``text`` to the call: appended to the string ``output`` of the function response
    just before it (what a model API reads as that call's result), else as a text part."""
    previous = parts[-1] if parts else None
    if isinstance(previous, FunctionResponsePart):
        body = previous.function_response.response
        output = body.get("output", "" if "error" not in body else None)
        if isinstance(output, str):
            joined = f"{output}\n{text}" if output else text
            update = {"response": {**body, "output": joined}}
            parts[-1] = replace_fields(
                previous,
                function_response=replace_fields(previous.function_response, **update),
            )
            return
    parts.append(TextPart(text=text))


def _reference(mime: str, verdict: MediaVerdict, path: Path | None, max_bytes: int) -> str:
    if media_type_problem(mime) is not None:
        mime = "media of no valid type"  # the problem names it, bounded
    size = describe_bytes(len(verdict.data or b""))
    if verdict.kind == "oversized":
        why = f"larger than the {describe_bytes(max_bytes)} a media part may take inline"
    else:
        why = verdict.problem
    where = f"saved at {path}" if path is not None else "it could not be saved"
    return f"[{mime}, {size}, not sent inline ({why}); {where}]"


async def check_media_parts(
    responses: list[ToolCallResponse], writer: Writer, max_bytes: int
) -> list[ToolCallResponse]:
    pending = []
    for owner, response in enumerate(responses):
        for part in response.parts:
            if type(part) is InlineDataPart or type(part) is FileDataPart:
                if not _media_checked(response):
                    pending.append(owner)
                break
    if not pending:
        return responses
    verdicts: dict[tuple[int, int], MediaVerdict] = {}
    references: dict[tuple[int, int], str] = {}
    jobs: dict[object, tuple[str, str, str | bytes, str]] = {}
    for owner in pending:
        response = responses[owner]
        for index, part in enumerate(response.parts):
            if isinstance(part, FileDataPart):
                file_data = part.file_data
                problem = file_data_problem(file_data.mime_type, file_data.file_uri)
                if problem is not None:
                    references[owner, index] = (
                        f"[a file reference that is not media: {problem}; sent as text]\n"
                        f"mimeType: {file_data.mime_type}\nfileUri: {file_data.file_uri}"
                    )
                continue
            if not isinstance(part, InlineDataPart):
                continue
            verdict = verdicts[owner, index] = await _verdict(part, max_bytes)
            job_id = f"{writer.id_of(owner)}-part{index}"
            mime = part.inline_data.mime_type
            if verdict.kind != "text" and verdict.data is not None:
                jobs[owner, index] = (job_id, response.name, verdict.data, media_suffix(mime))
            elif verdict.kind == "text" and response.persisted_output_files:
                # The response's listed files must hold whatever the model does not see.
                jobs[owner, index] = (job_id, response.name, verdict.text, ".txt")
    written = await writer.write_all(jobs)
    checked = list(responses)
    changed = False
    counts = Counter(verdict.kind for verdict in verdicts.values())
    for owner in pending:
        response = responses[owner]
        parts: list[Part] = []
        files = response.persisted_output_files
        for index, part in enumerate(response.parts):
            reference = references.get((owner, index))
            if reference is not None:
                _attach(parts, reference)
                continue
            found = verdicts.get((owner, index))
            if found is None or not isinstance(part, InlineDataPart):
                parts.append(part)
                continue
            verdict = found
            path = written.get((owner, index))
            mime = part.inline_data.mime_type
            if verdict.kind == "media" and path is None:
                parts.append(part)
                continue
            if verdict.kind == "media":
                parts.append(
                    part.model_copy(
                        update={
                            "inline_data": part.inline_data.model_copy(
                                update={"persisted_file": path}
                            )
                        }
                    )
                )
                continue
            if verdict.kind == "text":
                _attach(parts, f"[{verdict.problem}; sent as text]\n{verdict.text}")
            else:
                _attach(parts, _reference(mime, verdict, path, max_bytes))
            if files and verdict.kind == "text":
                files = (*files, path) if path is not None else ()
        if len(parts) == len(response.parts) and all(
            new is old for new, old in zip(parts, response.parts, strict=True)
        ):
            continue  # real media, not saved (no store): nothing to change or remember
        state = state_of(response.finalize_state)
        fitted = state.fitted if state is not None else ()
        checked[owner] = replace_fields(
            response,
            parts=parts,
            persisted_output_files=files,
            finalize_state=FinalizeState(fitted, media_checked=True),
        )
        changed = True
    (log.info if len(written) or len(counts) > 1 or "media" not in counts else log.debug)(
        "finalize.media_checked",
        parts=len(verdicts),
        inline=counts["media"],
        oversized=counts["oversized"],
        as_text=counts["text"],
        binary=counts["binary"],
        saved=len(written),
    )
    return checked if changed else responses
