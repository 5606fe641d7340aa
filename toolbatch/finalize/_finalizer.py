"""The shared finalizer: one batch of responses, one aggregate budget, persisted at most once.

The turn pipeline (``ToolScheduler.complete_turn``) calls :func:`finalize_tool_responses`
on the whole batch before hooks see it and again after. A pass:

1. checks media parts that no pass checked yet (see ``_media``): real media stays inline
   and is saved once; text labelled as media becomes text; other binary, and media over the
   per-part cap, are saved and replaced by a text reference naming the file;
2. measures every text slot, water-fills the budget across them, persists each cut
   response that has no persistence decision yet (once, with bounded concurrency), then
   fits the cut slots without I/O, so the cap holds whatever the disk did. The batch is
   kept as plain lists (slot texts, places, lengths); only the cut slots are fitted and
   each cut response is rebuilt once, from values already valid.

The walk that measures the slots also finds the media to check, so a batch without media
is read once to measure it and once more to rebuild what it cuts. The synchronous
stretches run with the cyclic garbage collector paused (see ``_collector``); a batch with
nothing to write is planned, fitted and rebuilt without an ``await`` between.

Persistence has a deadline: what is not written by then is treated as unsaved (the
response is cut without a file reference, still within budget).
"""

from __future__ import annotations

import contextlib
import os
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import eq, gt
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
    replace_finalized,
    replace_output,
)
from toolbatch.artifacts import DEFAULT_PERSIST_TIMEOUT_S, ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize._allocation import allocate_budget
from toolbatch.finalize._budget import effective_budget
from toolbatch.finalize._collector import collector_paused
from toolbatch.finalize._fit import Excerpt, cut_text, fit_excerpt
from toolbatch.finalize._hook_text import HOOK_TEXT_ARTIFACT, FinalizedTurn, HookText
from toolbatch.finalize._lifecycle import DEFAULT_LIFECYCLE_TOOLS, check_lifecycle_tools
from toolbatch.finalize._media import (
    DEFAULT_MEDIA_PART_BYTES,
    MediaVerdict,
    check_media,
    describe_bytes,
    file_data_problem,
    media_suffix,
)
from toolbatch.finalize._slots import (
    BatchSlots,
    FinalizeState,
    FittedSlot,
    OutputCut,
    Place,
    edit_parts,
    fitted_at,
    measure_batch,
    merge_fits,
    state_of,
)
from toolbatch.telemetry import note_cuts

__all__ = [
    "DEFAULT_PERSIST_CONCURRENCY",
    "DEFAULT_PERSIST_TIMEOUT_S",
    "finalize_tool_responses",
    "finalize_turn",
]

log = structlog.get_logger("toolbatch.finalize")

DEFAULT_PERSIST_CONCURRENCY: Final = 8
HOOK_TEXT_PLACE: Final[Place] = (0, "text", False)
"""A hook text's one slot: the text of its one part."""
PERSISTED_SLOT_SEPARATOR: Final = "\n\n"
"""A persisted response is its budgeted slot texts joined with this."""
_THREAD_DECODE_CHARS: Final = 1 * 2**20
"""Media data longer than this is decoded in a worker thread."""
_SMALL_BATCH: Final = 32
"""A batch of at most this many responses is measured with the collector left on."""
_NOT_PAUSED: Final = contextlib.nullcontext()


def _check_positive_int(name: str, value: object, example: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}; pass e.g. {name}={example}")


def _check_options(
    persist_concurrency: int, persist_timeout_s: float, media_part_bytes: int
) -> None:
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
    finalized = await finalize_turn(
        responses,
        (),
        budget=budget,
        store=store,
        lifecycle_tools=lifecycle_tools,
        persist_concurrency=persist_concurrency,
        persist_timeout_s=persist_timeout_s,
        media_part_bytes=media_part_bytes,
    )
    return finalized.responses


async def finalize_turn(
    responses: Sequence[ToolCallResponse],
    hook_text: Sequence[HookText],
    *,
    budget: int | float | None,
    store: ArtifactStore | None = None,
    lifecycle_tools: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS,
    persist_concurrency: int = DEFAULT_PERSIST_CONCURRENCY,
    persist_timeout_s: float = DEFAULT_PERSIST_TIMEOUT_S,
    media_part_bytes: int = DEFAULT_MEDIA_PART_BYTES,
) -> FinalizedTurn:
    """Bound a turn's responses and its own text (``hook_text``) together to ``budget``.

    :func:`finalize_tool_responses` with the turn's hook text beside the responses: each
    text is one slot of the same water-fill, cut like a response's output (one header
    naming its file) and saved once, when a pass first cuts it, under
    ``hook-text-<n>``. The two come back apart, each in the order given; nothing that
    fits is copied.
    """
    limit = effective_budget(budget)
    if (
        persist_concurrency is not DEFAULT_PERSIST_CONCURRENCY
        or media_part_bytes is not DEFAULT_MEDIA_PART_BYTES
        or persist_timeout_s is not DEFAULT_PERSIST_TIMEOUT_S
    ):  # the defaults (every turn's) are valid: checked only when given
        _check_options(persist_concurrency, persist_timeout_s, media_part_bytes)
    lifecycle = check_lifecycle_tools(lifecycle_tools)
    same = responses if isinstance(responses, list) else list(responses)
    hooks = hook_text if isinstance(hook_text, list) else list(hook_text)
    if limit is None:
        return FinalizedTurn(same, hooks)
    writer = _Writer(store, same, persist_concurrency, persist_timeout_s)
    return await _fit_budget(same, hooks, writer, limit, lifecycle, media_part_bytes)


class _Writer:
    """Persistence for one pass: bounded concurrency, one deadline, distinct ids.

    The deadline is ``timeout_s`` after the pass's first write starts (the media check's or
    the cut responses'): most passes write nothing and never read the clock.
    """

    def __init__(
        self,
        store: ArtifactStore | None,
        responses: Sequence[ToolCallResponse],
        concurrency: int,
        timeout_s: float,
    ) -> None:
        self.store = store
        self._responses = responses
        self._ids: list[str] | None = None  # made when first needed: most passes write nothing
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._deadline: float | None = None

    def remaining_s(self) -> float:
        """The seconds left before the pass's deadline (which starts with this first ask)."""
        now = anyio.current_time()
        if self._deadline is None:
            self._deadline = now + self._timeout_s
        return max(0.0, self._deadline - now)

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

        remaining = self.remaining_s()
        with anyio.move_on_after(remaining) as scope:
            async with anyio.create_task_group() as group:
                for key, job in jobs.items():
                    group.start_soon(one, key, job)
        if scope.cancelled_caught:
            log.warning(
                "finalize.persist_deadline",
                files=len(jobs),
                written=len(written),
                deadline_s=round(remaining, 3),
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
    if media_type_problem(mime) is not None:
        mime = "media of no valid type"  # the problem names it, bounded
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


# -- the text budget ---------------------------------------------------------------------


async def _fit_budget(
    same: list[ToolCallResponse],
    hooks: list[HookText],
    writer: _Writer,
    limit: int,
    lifecycle: frozenset[str],
    media_part_bytes: int,
) -> FinalizedTurn:
    # The media pass (which may await) runs only for a batch the measuring walk found media
    # in; it measures again only when the media pass changed a response. Measuring a small
    # batch allocates too little to be worth pausing the collector for.
    with collector_paused() if len(same) > _SMALL_BATCH else _NOT_PAUSED:
        slots = _measure(same, hooks, lifecycle)
        # The usual turn, without media, is measured and planned in one synchronous stretch.
        cuts = None if slots.media else _plan_cuts(slots, limit)
    if slots.media:
        checked = await _check_media(same, writer, media_part_bytes)
        with collector_paused():
            if checked is not same:
                same = checked
                slots = _measure(same, hooks, lifecycle)
            cuts = _plan_cuts(slots, limit)
    assert cuts is not None
    if type(cuts) is int:
        return FinalizedTurn(same, hooks, cuts)  # it fits: its measured length
    assert isinstance(cuts, _Cuts)
    with collector_paused():
        jobs = _persistence_jobs(same, hooks, cuts, writer)
        if not jobs:  # nothing to write: fitted with no await since it was planned
            return _finish(same, hooks, cuts, {}, limit)
    written = await writer.write_all(jobs)
    with collector_paused():
        return _finish(same, hooks, cuts, written, limit)


def _measure(
    same: list[ToolCallResponse], hooks: list[HookText], lifecycle: frozenset[str]
) -> BatchSlots:
    """The batch's slots: the responses', then one per hook text (owners after them)."""
    slots = measure_batch(same, lifecycle)
    if hooks:
        texts, places, ends, outputs = slots.texts, slots.places, slots.ends, slots.outputs
        for hook in hooks:
            texts.append(hook.text)
            places.append(HOOK_TEXT_PLACE)
            ends.append(len(texts))
            outputs.append(None)
    return slots


def _persistence_jobs(
    same: list[ToolCallResponse], hooks: list[HookText], cuts: _Cuts, writer: _Writer
) -> dict[object, tuple[str, str, str | bytes, str]]:
    """A write per cut response or hook text that has no persistence decision yet (none
    without a store)."""
    jobs: dict[object, tuple[str, str, str | bytes, str]] = {}
    if writer.store is not None:
        count = len(same)
        for owner in cuts.owners:
            if owner >= count:
                hook = hooks[owner - count]
                if hook.persisted_output_files is None:
                    job_id = str(owner - count + 1)
                    jobs[owner] = (job_id, HOOK_TEXT_ARTIFACT, hook.text, ".txt")
            elif same[owner].persisted_output_files is None:
                start, end = cuts.slots_of(owner)
                text = PERSISTED_SLOT_SEPARATOR.join(cuts.slots.texts[start:end])
                jobs[owner] = (writer.id_of(owner), same[owner].name, text, ".txt")
    return jobs


def _finish(
    same: list[ToolCallResponse],
    hooks: list[HookText],
    cuts: _Cuts,
    written: dict[object, Path],
    limit: int,
) -> FinalizedTurn:
    finalized, hooks, after, decided = _rebuild(same, hooks, cuts, written)
    log.info(
        "finalize.reduced",
        responses=len(same),
        hook_texts=len(hooks),
        reduced=len(cuts.owners),
        slots_cut=len(cuts.cut),
        budget=limit,
        before=cuts.before,
        after=after,
        persisted=len(written),
        unpersisted=decided - len(written),
    )
    note_cuts(slots_cut=len(cuts.cut), responses_cut=len(cuts.owners))
    return FinalizedTurn(finalized, hooks)


@dataclass(slots=True)
class _Cuts:
    """A batch's budgeted slots and what the water-fill cuts, as plain lists.

    Attributes:
        slots: the batch's slots as :func:`measure_batch` found them.
        lengths: every slot's length.
        allocation: every slot's share of the budget.
        cut: the indices of the slots longer than their share, ascending.
        owners: the responses with a cut slot, ascending.
        bounds: ``cut[bounds[k]:bounds[k + 1]]`` are the cut slots of ``owners[k]``.
        before: the batch's budgeted length.
    """

    slots: BatchSlots
    lengths: list[int]
    allocation: list[int]
    cut: list[int]
    owners: list[int]
    bounds: Sequence[int]
    before: int

    def slots_of(self, owner: int) -> tuple[int, int]:
        """The response's slots: ``start:end`` in the batch lists."""
        ends = self.slots.ends
        return (ends[owner - 1] if owner else 0), ends[owner]


def _plan_cuts(slots: BatchSlots, limit: int) -> _Cuts | int:
    """Water-fill ``limit`` across the batch's slots; the batch's length when it fits."""
    texts, ends = slots.texts, slots.ends
    if len(texts) == 1:  # a one-call turn, the usual one: no lists to make when it fits
        before = len(texts[0])
        if before <= limit:
            return before
        lengths = [before]
    else:
        lengths = list(map(len, texts))
        before = sum(lengths)
        if before <= limit:
            return before
    allocation = allocate_budget(lengths, limit)
    cut = list(compress(range(len(lengths)), map(gt, lengths, allocation)))
    count = len(cut)
    if len(ends) == len(texts) and all(map(eq, ends, range(1, len(ends) + 1))):
        # One slot per response (the usual batch): slot i is response i's.
        every = range(count + 1)
        return _Cuts(slots, lengths, allocation, cut, cut, every, before)
    owners: list[int] = []
    bounds: list[int] = []
    first = 0
    while first < count:
        owner = bisect_right(ends, cut[first])
        owners.append(owner)
        bounds.append(first)
        end = ends[owner]
        first += 1
        if first < count and cut[first] < end:
            first = bisect_left(cut, end, first)
    bounds.append(count)
    return _Cuts(slots, lengths, allocation, cut, owners, bounds, before)


def _rebuild(
    same: list[ToolCallResponse], hooks: list[HookText], cuts: _Cuts, written: dict[object, Path]
) -> tuple[list[ToolCallResponse], list[HookText], int, int]:
    """Fit the cut slots and rebuild each cut response or hook text once; the others stay
    as they are. Returns the batch, the hook texts, the budgeted length after, and how many
    responses and texts got their persistence decision in this pass."""
    slots = cuts.slots
    texts, places, outputs = slots.texts, slots.places, slots.outputs
    lengths, allocation, cut = cuts.lengths, cuts.allocation, cuts.cut
    bounds = cuts.bounds
    finalized = list(same)
    count = len(same)
    fitted_hooks = list(hooks)
    after = cuts.before
    decided_now = 0
    for group, owner in enumerate(cuts.owners):
        if owner >= count:
            index = cut[bounds[group]]
            hook = hooks[owner - count]
            fitted_hooks[owner - count], saved, deciding = _fit_hook_text(
                hook, allocation[index], written.get(owner)
            )
            after -= saved
            decided_now += deciding
            continue
        response = same[owner]
        files = response.persisted_output_files
        deciding = files is None
        if deciding:
            decided_now += 1
            files = (written[owner],) if owner in written else ()
        paths: Sequence[str] = [os.fspath(path) for path in files] if files else ()
        first = bounds[group]
        if response.finalize_state is None and bounds[group + 1] - first == 1:
            # The usual case: one slot, cut from its whole text, no earlier fit.
            index = cut[first]
            length = lengths[index]
            preview, head, tail = cut_text(texts[index], allocation[index], paths)
            after -= length - len(preview)
            function_response = outputs[owner]
            if function_response is not None:
                # The output was the body's only key: the new body is the preview alone.
                state = OutputCut(preview, len(head), len(tail), length)
                finalized[owner] = replace_output(
                    response, function_response, preview, state, files
                )
                continue
            place = places[index]
            parts = edit_parts(response.parts, [(place, preview)])
            excerpt = Excerpt(head, tail, length)
            new_state: object = FinalizeState((FittedSlot(place[0], place[1], preview, excerpt),))
        else:
            parts, new_state, saved = _refit(
                response, cut[first : bounds[group + 1]], cuts, *cuts.slots_of(owner), paths
            )
            after -= saved
        finalized[owner] = replace_finalized(response, parts, new_state, files)
    return finalized, fitted_hooks, after, decided_now


def _fit_hook_text(hook: HookText, limit: int, path: Path | None) -> tuple[HookText, int, bool]:
    """A hook text cut to ``limit`` (from its excerpt when it is a preview a pass made), the
    code points saved, and whether its persistence was decided now (``path``: the file
    written in this pass)."""
    files = hook.persisted_output_files
    deciding = files is None
    if files is None:
        files = (path,) if path is not None else ()
    paths = [os.fspath(file) for file in files]
    text = hook.text
    excerpt = hook.excerpt
    if excerpt is not None:
        preview, excerpt = fit_excerpt(excerpt, limit, paths=paths)
    else:
        preview, head, tail = cut_text(text, limit, paths)
        excerpt = Excerpt(head, tail, len(text))
    return HookText(preview, files, excerpt), len(text) - len(preview), deciding


def _refit(
    response: ToolCallResponse,
    cut: list[int],
    cuts: _Cuts,
    start: int,
    end: int,
    paths: Sequence[str],
) -> tuple[list[Part], object, int]:
    """Fit a response's cut slots (indices ``cut``, its slots ``start:end``) in general.

    A slot that still holds a preview a finalizer made is cut from its excerpt; earlier fits
    of slots not cut now are kept in the new state. Returns the new parts, the new
    ``finalize_state`` and the code points saved.
    """
    texts, places, allocation = cuts.slots.texts, cuts.slots.places, cuts.allocation
    state = state_of(response.finalize_state)
    known = state.lookup() if state is not None and state.fitted else None
    edits: list[tuple[Place, str]] = []
    fits: list[FittedSlot] = []
    saved = 0
    for index in cut:
        place = places[index]
        part, field, _ = place
        text = texts[index]
        fitted = fitted_at(known, part, field, text)
        if fitted is None:
            preview, head, tail = cut_text(text, allocation[index], paths)
            excerpt = Excerpt(head, tail, len(text))
        else:
            preview, excerpt = fit_excerpt(fitted.excerpt, allocation[index], paths=paths)
        saved += len(text) - len(preview)
        edits.append((place, preview))
        fits.append(FittedSlot(part, field, preview, excerpt))
    earlier = (
        [
            fitted
            for text, (part, field, _) in zip(texts[start:end], places[start:end], strict=True)
            if (fitted := fitted_at(known, part, field, text)) is not None
        ]
        if known is not None
        else []
    )
    media_checked = state is not None and state.media_checked
    new_state = merge_fits(earlier, fits, media_checked=media_checked)
    return edit_parts(response.parts, edits), new_state, saved
