"""The finalizer's text budget: measure a turn's slots, plan the cuts, fit and rebuild.

The water-fill plan (:class:`Cuts`) is kept as plain lists; only the cut slots are fitted
and each cut response or hook text is rebuilt once, from values already valid. Pure except
for logging: the writes the plan needs are made by the caller.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter, gt
from pathlib import Path
from typing import Final, cast

import structlog

from toolbatch._core import Part, ToolCallResponse, replace_finalized, replace_output
from toolbatch.finalize._allocation import allocate_budget
from toolbatch.finalize._fit import Excerpt, TextCutter, cut_ends, cut_text, fit_excerpt
from toolbatch.finalize._hook_text import HOOK_TEXT_ARTIFACT, FinalizedTurn, HookText
from toolbatch.finalize._slots import (
    BatchSlots,
    FittedSlot,
    OutputCut,
    Place,
    edit_parts,
    fitted_at,
    measure_batch,
    merge_fits,
    state_of,
)
from toolbatch.finalize._writer import Writer
from toolbatch.telemetry import note_cuts

log = structlog.get_logger("toolbatch.finalize")

_new: Final = object.__new__
_FILES_OF: Final = attrgetter("persisted_output_files")
HOOK_TEXT_PLACE: Final[Place] = (0, "text", False)
"""A hook text's one slot: the text of its one part."""
PERSISTED_SLOT_SEPARATOR: Final = "\n\n"
"""A persisted response is its budgeted slot texts joined with this."""


def measure_turn(
    same: list[ToolCallResponse], hooks: list[HookText], lifecycle: frozenset[str]
) -> BatchSlots:
    """The batch's slots: the responses', then one per hook text (owners after them, one slot
    each)."""
    slots = measure_batch(same, lifecycle)
    if hooks:
        texts, places, ends, outputs = slots.texts, slots.places, slots.ends, slots.outputs
        for hook in hooks:
            texts.append(hook.text)
            places.append(HOOK_TEXT_PLACE)
            ends.append(len(texts))
            outputs.append(None)
    return slots


def persistence_jobs(
    same: list[ToolCallResponse], hooks: list[HookText], cuts: Cuts, writer: Writer
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


def finish_cuts(
    same: list[ToolCallResponse],
    hooks: list[HookText],
    cuts: Cuts,
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
class Cuts:
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


def plan_cuts(slots: BatchSlots, limit: int) -> Cuts | int:
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
    if slots.one_each:  # the usual batch: slot i is response i's
        every = range(count + 1)
        return Cuts(slots, lengths, allocation, cut, cut, every, before)
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
    return Cuts(slots, lengths, allocation, cut, owners, bounds, before)


def _rebuild(
    same: list[ToolCallResponse], hooks: list[HookText], cuts: Cuts, written: dict[object, Path]
) -> tuple[list[ToolCallResponse], list[HookText], int, int]:
    """Fit the cut slots and rebuild each cut response or hook text once; the others stay
    as they are. Returns the batch, the hook texts, the budgeted length after, and how many
    responses and texts got their persistence decision in this pass."""
    texts, outputs = cuts.slots.texts, cuts.slots.outputs
    lengths, allocation, owners = cuts.lengths, cuts.allocation, cuts.owners
    finalized = list(same)
    # The usual cut: a response whose one slot is its output alone (the body's only key; a
    # hook text has no such output), cut from its whole text (no earlier fit): the new
    # body is the preview. They are handled a step at a time over all of them (which
    # responses, their files, their previews, the new responses): each step one loop.
    usual = [owner for owner in owners if outputs[owner] is not None]
    # Each one's slot (its only one): with one slot per response, the owner's own index.
    picks = usual if owners is cuts.cut else [cuts.slots.ends[owner] - 1 for owner in usual]
    responses = list(map(same.__getitem__, usual))
    known = list(map(_FILES_OF, responses))
    decided_now = known.count(None)
    files: list[tuple[Path, ...]]
    if not decided_now:  # every one decided already
        files = cast("list[tuple[Path, ...]]", known)
    elif not written and decided_now == len(known):  # none decided, nothing written
        files = [()] * decided_now
    else:
        files = [
            found if found is not None else (written[owner],) if owner in written else ()
            for owner, found in zip(usual, known, strict=True)
        ]
    paths = [[os.fspath(path) for path in found] for found in files] if any(files) else None
    cutter = TextCutter()  # the batch's cut slots share a few layouts
    previews, heads, tails = cutter.cut_all(texts, allocation, picks, paths)
    sources = list(map(lengths.__getitem__, picks))
    after = cuts.before - sum(sources) + sum(map(len, previews))
    for owner, response, function_response, length, found, preview, head_size, tail_size in zip(
        usual,
        responses,
        map(outputs.__getitem__, usual),
        sources,
        files,
        previews,
        heads,
        tails,
        strict=True,
    ):
        # OutputCut(preview, head_size, tail_size, length) with its fields set directly: no
        # __init__ call per cut response (about 1 ms per 10,000).
        state = _new(OutputCut)
        state.text = preview
        state.head_size = head_size
        state.tail_size = tail_size
        state.length = length
        finalized[owner] = replace_output(response, function_response, preview, state, found)
    fitted_hooks = list(hooks)
    if len(usual) == len(owners):
        return finalized, fitted_hooks, after, decided_now
    count = len(same)
    bounds, cut = cuts.bounds, cuts.cut
    for group, owner in enumerate(owners):
        if owner >= count:
            fitted_hooks[owner - count], saved, deciding = _fit_hook_text(
                hooks[owner - count], allocation[cut[bounds[group]]], written.get(owner)
            )
            decided_now += deciding
            after -= saved
        elif outputs[owner] is None:
            response = same[owner]
            found = response.persisted_output_files
            if found is None:
                decided_now += 1
                found = (written[owner],) if owner in written else ()
            slots = cut[bounds[group] : bounds[group + 1]]
            parts, new_state, saved = _refit(
                response, slots, cuts, owner, [os.fspath(path) for path in found], cutter.cut
            )
            finalized[owner] = replace_finalized(response, parts, new_state, found)
            after -= saved
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
    cuts: Cuts,
    owner: int,
    paths: Sequence[str],
    cut_whole: Callable[[str, int, Sequence[str]], tuple[str, int, int]],
) -> tuple[list[Part], object, int]:
    """Fit the cut slots (indices ``cut``) of response ``owner`` in general.

    A slot that still holds a preview a finalizer made is cut from its excerpt; the others
    are cut whole (by ``cut_whole``, the batch's cutter). Earlier fits of slots not cut now
    are kept in the new state. Returns the new parts, the new ``finalize_state`` and the
    code points saved.
    """
    start, end = cuts.slots_of(owner)
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
            length = len(text)
            preview, head_size, tail_size = cut_whole(text, allocation[index], paths)
            excerpt = Excerpt(*cut_ends(preview, head_size, tail_size, length), length)
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
