"""The shared finalizer: one batch of responses, one aggregate budget, persisted at most once.

Every runtime boundary calls :func:`finalize_tool_responses` on the whole batch before it
is recorded and sent. It measures every text slot, water-fills the budget across them,
persists each cut response that has no persistence decision yet (once, with bounded
concurrency), then fits the cut slots without I/O, so the cap holds whatever the disk did.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import anyio
import structlog

from toolbatch._wire import ToolCallResponse
from toolbatch.artifacts import ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize._budget import effective_budget
from toolbatch.finalize._lifecycle import DEFAULT_LIFECYCLE_REMINDERS, validate_reminders
from toolbatch.finalize._slots import (
    FittedSlot,
    Slot,
    collect_slots,
    cut_slots,
    fit_slot,
    merge_state,
    rebuild_parts,
    response_text_length,
)

__all__ = ["DEFAULT_PERSIST_CONCURRENCY", "finalize_tool_responses"]

log = structlog.get_logger("toolbatch.finalize")

DEFAULT_PERSIST_CONCURRENCY: Final = 8
PERSISTED_SLOT_SEPARATOR: Final = "\n\n"
"""A persisted response is its budgeted slot texts joined with this."""


async def finalize_tool_responses(
    responses: Sequence[ToolCallResponse],
    *,
    budget: int | float | None,
    store: ArtifactStore | None = None,
    lifecycle_reminders: Mapping[str, Sequence[str]] = DEFAULT_LIFECYCLE_REMINDERS,
    persist_concurrency: int = DEFAULT_PERSIST_CONCURRENCY,
) -> list[ToolCallResponse]:
    """Bound one batch's model-facing tool text to ``budget`` code points.

    Returns the same number of responses in the same order. When the budget is disabled
    (``None``, ``<= 0``, infinite) or the batch already fits, the input list itself comes
    back (the same objects, no I/O). Otherwise only the responses with a cut slot are
    rebuilt: each cut slot becomes a header listing the response's artifact paths, a head
    and a tail; media, other keys and part order stay as they were.

    A cut response with no persistence decision (``persisted_output_files is None``) is
    persisted once through ``store`` (its budgeted slot texts joined by a blank line) and
    gets ``(path,)``, or ``()`` when the store fails or there is no store. A decided
    response is never written again; its paths are reused. A response already finalized
    with a larger budget has its previews shortened, not wrapped again.

    Args:
        responses: the batch, in the model's call order.
        budget: code points of tool text allowed across the batch (protected lifecycle
            reminders sit outside it).
        store: where complete output is persisted; ``None`` persists nothing.
        lifecycle_reminders: protected tool names and their reminder texts.
        persist_concurrency: how many responses are persisted at once.

    Raises:
        ConfigError: ``budget``, ``lifecycle_reminders`` or ``persist_concurrency`` is
            invalid. Persistence failures are logged, never raised.
    """
    limit = effective_budget(budget)
    if (
        isinstance(persist_concurrency, bool)
        or not isinstance(persist_concurrency, int)
        or persist_concurrency < 1
    ):
        raise ConfigError(
            f"persist_concurrency must be an int >= 1, got {persist_concurrency!r}; "
            f"pass e.g. persist_concurrency={DEFAULT_PERSIST_CONCURRENCY}"
        )
    reminders = validate_reminders(lifecycle_reminders)
    same = responses if isinstance(responses, list) else list(responses)
    if limit is None:
        return same
    slots_of = [
        collect_slots(
            response.parts,
            owner=owner,
            include_top_level_text=True,
            reminders=reminders,
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
    decided_now: dict[int, tuple[Path, ...]] = dict.fromkeys(undecided, ())
    if store is not None and undecided:
        decided_now.update(
            await _persist(store, same, slots_of, undecided, concurrency=persist_concurrency)
        )

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
            "content_length": response_text_length(parts),
            "finalize_state": merge_state(slots_of[owner], (fitted for _, fitted in fits)),
        }
        if owner in decided_now:
            update["persisted_output_files"] = decided_now[owner]
        finalized[owner] = response.model_copy(update=update)
    log.info(
        "finalize.reduced",
        responses=len(same),
        reduced=len(cut_by_owner),
        slots_cut=len(cuts),
        budget=limit,
        before=before,
        after=after,
        persisted=sum(1 for owner in undecided if decided_now[owner]),
        unpersisted=sum(1 for owner in undecided if not decided_now[owner]),
    )
    return finalized


def _persistence_ids(responses: Sequence[ToolCallResponse], owners: list[int]) -> dict[int, str]:
    """An id per persisted response, distinct even when call ids repeat in the batch.

    A call id used once is kept. The k-th response with a repeated id gets ``<id>-k``
    (counting every response of the batch, persisted or not, so a response keeps its id
    over repeated passes), skipping any id another response of the batch has. Two
    responses therefore never share a file, even when their content is identical.
    """
    counts = Counter(response.call_id for response in responses)
    taken = set(counts)
    next_suffix: dict[str, int] = {}
    ids: dict[int, str] = {}
    wanted = set(owners)
    for owner, response in enumerate(responses):
        call_id = response.call_id
        if counts[call_id] == 1:
            if owner in wanted:
                ids[owner] = call_id
            continue
        suffix = next_suffix.get(call_id, 1)
        while (candidate := f"{call_id}-{suffix}") in taken:
            suffix += 1
        taken.add(candidate)
        next_suffix[call_id] = suffix + 1
        if owner in wanted:
            ids[owner] = candidate
    return ids


async def _persist(
    store: ArtifactStore,
    responses: Sequence[ToolCallResponse],
    slots_of: Sequence[Sequence[Slot]],
    owners: list[int],
    *,
    concurrency: int,
) -> dict[int, tuple[Path, ...]]:
    ids = _persistence_ids(responses, owners)
    decided: dict[int, tuple[Path, ...]] = {}
    limiter = anyio.CapacityLimiter(concurrency)

    async def persist_one(owner: int) -> None:
        response = responses[owner]
        async with limiter:
            # Joined under the limiter, so at most ``concurrency`` copies exist at once.
            text = PERSISTED_SLOT_SEPARATOR.join(slot.text for slot in slots_of[owner])
            try:
                path = await store.persist(ids[owner], response.name, text)
            except Exception as exc:  # any store failure: the cap must still hold
                log.warning(
                    "finalize.persist_failed",
                    call_id=response.call_id,
                    tool=response.name,
                    chars=len(text),
                    error_type=type(exc).__name__,
                    error=str(exc),
                )
                decided[owner] = ()
            else:
                decided[owner] = (path,)

    async with anyio.create_task_group() as group:
        for owner in owners:
            group.start_soon(persist_one, owner)
    return decided
