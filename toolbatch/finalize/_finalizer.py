"""The shared finalizer: one batch of responses, one aggregate budget, persisted at most once.

The turn pipeline (``ToolScheduler.complete_turn``) calls :func:`finalize_tool_responses`
on the whole batch before hooks see it and again after. A pass:

1. checks media parts that no pass checked yet (see ``_media``): real media stays inline
   and is saved once; text labelled as media becomes text; other binary, and media over the
   per-part cap, are saved and replaced by a text reference naming the file;
2. measures every text slot, water-fills the budget across them, persists each cut
   response that has no persistence decision yet (once, with bounded concurrency), then
   fits the cut slots without I/O, so the cap holds whatever the disk did.

Persistence has a deadline: what is not written by then is treated as unsaved (the
response is cut without a file reference, still within budget).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
import structlog

from toolbatch._wire import (
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCallResponse,
    replace_fields,
)
from toolbatch.artifacts import ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize._budget import effective_budget
from toolbatch.finalize._lifecycle import DEFAULT_LIFECYCLE_TOOLS, check_lifecycle_tools
from toolbatch.finalize._media import (
    DEFAULT_MEDIA_PART_BYTES,
    MediaVerdict,
    check_media,
    describe_bytes,
    media_suffix,
)
from toolbatch.finalize._slots import (
    FinalizeState,
    FittedSlot,
    Slot,
    collect_slots,
    cut_slots,
    fit_slot,
    merge_state,
    rebuild_parts,
    state_of,
)
from toolbatch.telemetry import note_cuts

__all__ = [
    "DEFAULT_PERSIST_CONCURRENCY",
    "DEFAULT_PERSIST_TIMEOUT_S",
    "finalize_tool_responses",
]

log = structlog.get_logger("toolbatch.finalize")

DEFAULT_PERSIST_CONCURRENCY: Final = 8
DEFAULT_PERSIST_TIMEOUT_S: Final = 30.0
"""How long one pass may spend persisting; past it, the pass goes on without those files."""
PERSISTED_SLOT_SEPARATOR: Final = "\n\n"
"""A persisted response is its budgeted slot texts joined with this."""
_THREAD_DECODE_CHARS: Final = 1 * 2**20
"""Media data longer than this is decoded in a worker thread."""


def _check_positive_int(name: str, value: object, example: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}; pass e.g. {name}={example}")


async def finalize_tool_responses(
    responses: Sequence[ToolCallResponse],
    *,
    budget: int | float | None,
    store: ArtifactStore | None = None,
    lifecycle_tools: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS,
    persist_concurrency: int = DEFAULT_PERSIST_CONCURRENCY,
    persist_timeout_s: float = DEFAULT_PERSIST_TIMEOUT_S,
    media_part_bytes: int = DEFAULT_MEDIA_PART_BYTES,
) -> list[ToolCallResponse]:
    """Bound one batch's model-facing tool text to ``budget`` code points.

    Returns the same number of responses in the same order. When the budget is ``None``,
    ``<= 0`` or infinite, nothing is done at all (media included): the input list itself
    comes back. When the batch already fits and holds no media to check, it comes back too
    (the same objects, no I/O). Otherwise only the responses
    that change are rebuilt: each cut slot becomes a header listing the response's
    artifact paths, a head and a tail; part order stays as it was. ``content_length``
    always follows the returned parts.

    A cut response with no persistence decision (``persisted_output_files is None``) is
    persisted once through ``store`` (its budgeted slot texts joined by a blank line) and
    gets ``(path,)``, or ``()`` when the store fails, misses the deadline or there is no
    store. A decided response is never written again; its paths are reused. A response
    already finalized with a larger budget has its previews shortened, not wrapped again.

    Args:
        responses: the batch, in the model's call order.
        budget: code points of tool text allowed across the batch (the successful output
            of lifecycle tools sits outside it).
        store: where complete output and media are persisted; ``None`` persists nothing.
        lifecycle_tools: tools whose successful output is kept inline, unbudgeted.
        persist_concurrency: how many files are written at once.
        persist_timeout_s: how long the pass may spend persisting.
        media_part_bytes: the largest media part kept inline.

    Raises:
        ConfigError: an argument is invalid. Persistence failures are logged, never raised.
    """
    limit = effective_budget(budget)
    _check_positive_int("persist_concurrency", persist_concurrency, DEFAULT_PERSIST_CONCURRENCY)
    _check_positive_int("media_part_bytes", media_part_bytes, DEFAULT_MEDIA_PART_BYTES)
    if (
        isinstance(persist_timeout_s, bool)
        or not isinstance(persist_timeout_s, int | float)
        or not persist_timeout_s > 0
    ):
        raise ConfigError(
            f"persist_timeout_s must be a number of seconds > 0, got {persist_timeout_s!r}"
        )
    lifecycle = check_lifecycle_tools(lifecycle_tools)
    same = responses if isinstance(responses, list) else list(responses)
    if limit is None:
        return same
    writer = _Writer(store, same, persist_concurrency, anyio.current_time() + persist_timeout_s)
    checked = await _check_media(same, writer, media_part_bytes)
    return await _fit_budget(checked, writer, limit, lifecycle)


class _Writer:
    """Persistence for one pass: bounded concurrency, one deadline, distinct ids."""

    def __init__(
        self,
        store: ArtifactStore | None,
        responses: Sequence[ToolCallResponse],
        concurrency: int,
        deadline: float,
    ) -> None:
        self.store = store
        self._responses = responses
        self._ids: list[str] | None = None  # made when first needed: most passes write nothing
        self._concurrency = concurrency
        self._deadline = deadline

    def id_of(self, owner: int) -> str:
        if self._ids is None:
            self._ids = _persistence_ids(self._responses)
        return self._ids[owner]

    async def write_all(
        self, jobs: dict[object, tuple[str, str, str | bytes, str]]
    ) -> dict[object, Path]:
        """Write each job ``key -> (id, tool, text or bytes, suffix)``; the paths written."""
        written: dict[object, Path] = {}
        if self.store is None or not jobs:
            return written
        store = self.store
        limiter = anyio.CapacityLimiter(self._concurrency)

        async def one(key: object, job: tuple[str, str, str | bytes, str]) -> None:
            call_id, tool, content, suffix = job
            async with limiter:
                try:
                    if isinstance(content, bytes):
                        path = await store.persist_bytes(call_id, tool, content, suffix=suffix)
                    else:
                        path = await store.persist(call_id, tool, content)
                except Exception as exc:  # any store failure: the cap must still hold
                    log.warning(
                        "finalize.persist_failed",
                        call_id=call_id,
                        tool=tool,
                        size=len(content),
                        error_type=type(exc).__name__,
                        error=str(exc),
                    )
                else:
                    written[key] = path

        remaining = self._deadline - anyio.current_time()
        with anyio.move_on_after(max(0.0, remaining)) as scope:
            async with anyio.create_task_group() as group:
                for key, job in jobs.items():
                    group.start_soon(one, key, job)
        if scope.cancelled_caught:
            log.warning(
                "finalize.persist_deadline",
                files=len(jobs),
                written=len(written),
                deadline_s=round(max(0.0, remaining), 3),
            )
        return written


def _persistence_ids(responses: Sequence[ToolCallResponse]) -> list[str]:
    """An id per response, distinct even when call ids repeat in the batch.

    A call id used once is kept. The k-th response with a repeated id gets ``<id>-k``
    (counting every response of the batch, so a response keeps its id over repeated
    passes), skipping any id another response of the batch has. Two responses therefore
    never share a file, even when their content is identical.
    """
    counts = Counter(response.call_id for response in responses)
    taken = set(counts)
    next_suffix: dict[str, int] = {}
    ids: list[str] = []
    for response in responses:
        call_id = response.call_id
        if counts[call_id] == 1:
            ids.append(call_id)
            continue
        suffix = next_suffix.get(call_id, 1)
        while (candidate := f"{call_id}-{suffix}") in taken:
            suffix += 1
        taken.add(candidate)
        next_suffix[call_id] = suffix + 1
        ids.append(candidate)
    return ids


# -- media -------------------------------------------------------------------------------


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
    size = describe_bytes(len(verdict.data or b""))
    if verdict.kind == "oversized":
        why = f"larger than the {describe_bytes(max_bytes)} a media part may take inline"
    else:
        why = verdict.problem
    where = f"saved at {path}" if path is not None else "it could not be saved"
    return f"[{mime}, {size}, not sent inline ({why}); {where}]"


async def _check_media(
    responses: list[ToolCallResponse], writer: _Writer, max_bytes: int
) -> list[ToolCallResponse]:
    pending = []
    for owner, response in enumerate(responses):
        for part in response.parts:
            if type(part) is InlineDataPart:
                if not _media_checked(response):
                    pending.append(owner)
                break
    if not pending:
        return responses
    verdicts: dict[tuple[int, int], MediaVerdict] = {}
    jobs: dict[object, tuple[str, str, str | bytes, str]] = {}
    for owner in pending:
        response = responses[owner]
        for index, part in enumerate(response.parts):
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


# -- the text budget ---------------------------------------------------------------------


async def _fit_budget(
    same: list[ToolCallResponse], writer: _Writer, limit: int, lifecycle: frozenset[str]
) -> list[ToolCallResponse]:
    slots_of = [
        collect_slots(
            response.parts,
            owner=owner,
            include_top_level_text=True,
            lifecycle=lifecycle,
            tool=response.name,
            success=response.status == "success",
            state=response.finalize_state,
        )
        for owner, response in enumerate(same)
    ]
    slots = [slot for owned in slots_of for slot in owned]
    before = sum(len(slot.text) for slot in slots)
    if before <= limit:
        return same

    cuts = cut_slots(slots, limit)
    cut_by_owner: dict[int, list[tuple[Slot, int]]] = {}
    for slot, allocation in cuts:
        cut_by_owner.setdefault(slot.owner, []).append((slot, allocation))
    undecided = [owner for owner in cut_by_owner if same[owner].persisted_output_files is None]
    jobs: dict[object, tuple[str, str, str | bytes, str]] = {}
    for owner in undecided:
        text = PERSISTED_SLOT_SEPARATOR.join(slot.text for slot in slots_of[owner])
        jobs[owner] = (writer.id_of(owner), same[owner].name, text, ".txt")
    written = await writer.write_all(jobs)
    decided_now: dict[int, tuple[Path, ...]] = {
        owner: (written[owner],) if owner in written else () for owner in undecided
    }

    finalized = list(same)
    after = before
    for owner, owned_cuts in cut_by_owner.items():
        response = same[owner]
        files = decided_now.get(owner, response.persisted_output_files) or ()
        paths = [os.fspath(path) for path in files]
        fits: list[tuple[Slot, FittedSlot]] = []
        for slot, allocation in owned_cuts:
            fitted = fit_slot(slot, allocation, paths=paths)
            after -= len(slot.text) - len(fitted.text)
            fits.append((slot, fitted))
        parts = rebuild_parts(response.parts, fits)
        update: dict[str, object] = {
            "parts": parts,
            "finalize_state": merge_state(
                slots_of[owner],
                (fitted for _, fitted in fits),
                media_checked=_media_checked(response),
            ),
        }
        if owner in decided_now:
            update["persisted_output_files"] = decided_now[owner]
        finalized[owner] = replace_fields(response, **update)
    log.info(
        "finalize.reduced",
        responses=len(same),
        reduced=len(cut_by_owner),
        slots_cut=len(cuts),
        budget=limit,
        before=before,
        after=after,
        persisted=len(written),
        unpersisted=len(undecided) - len(written),
    )
    note_cuts(slots_cut=len(cuts), responses_cut=len(cut_by_owner))
    return finalized
