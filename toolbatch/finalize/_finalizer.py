"""The shared finalizer: one batch of responses, one aggregate budget, persisted at most once.

The turn pipeline (``ToolScheduler.complete_turn``) calls :func:`finalize_tool_responses`
on the whole batch before hooks see it and again after. A pass:

1. checks media parts that no pass checked yet (``_media_pass``; the checks are ``_media``):
   real media stays inline and is saved once; text labelled as media becomes text; other
   binary, and media over the per-part cap, are saved and replaced by a text reference
   naming the file;
2. measures every text slot, water-fills the budget across them (``_cuts``), persists each
   cut response that has no persistence decision yet (once, with bounded concurrency, see
   ``_writer``), then fits the cut slots without I/O, so the cap holds whatever the disk
   did. The batch is kept as plain lists (slot texts, places, lengths); only the cut slots
   are fitted and each cut response is rebuilt once, from values already valid.

The walk that measures the slots also finds the media to check, so a batch without media
is read once to measure it and once more to rebuild what it cuts. The synchronous
stretches run with the cyclic garbage collector paused (see ``_collector``); a batch with
nothing to write is planned, fitted and rebuilt without an ``await`` between.

Persistence has a deadline: what is not written by then is treated as unsaved (the
response is cut without a file reference, still within budget).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeAlias

from toolbatch._core import ToolCallResponse
from toolbatch.artifacts import DEFAULT_PERSIST_TIMEOUT_S, ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize._budget import effective_budget
from toolbatch.finalize._collector import collector_paused
from toolbatch.finalize._cuts import Cuts, finish_cuts, measure_turn, persistence_jobs, plan_cuts
from toolbatch.finalize._hook_text import FinalizedTurn, HookText
from toolbatch.finalize._lifecycle import DEFAULT_LIFECYCLE_TOOLS, check_lifecycle_tools
from toolbatch.finalize._media import DEFAULT_MEDIA_PART_BYTES
from toolbatch.finalize._media_pass import check_media_parts
from toolbatch.finalize._slots import plain_output_length
from toolbatch.finalize._writer import Writer

__all__ = [
    "DEFAULT_PERSIST_CONCURRENCY",
    "DEFAULT_PERSIST_TIMEOUT_S",
    "finalize_tool_responses",
    "finalize_turn",
]

DEFAULT_PERSIST_CONCURRENCY: Final = 8
_SMALL_BATCH: Final = 32
"""A batch of at most this many responses is measured with the collector left on."""
PersistTimeout: TypeAlias = Callable[[], float]
"""What gives a pass its persist timeout (seconds, > 0) when it first writes: most passes
write nothing and never ask (a turn's one deadline across its passes)."""


def _check_positive_int(name: str, value: object, example: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}; pass e.g. {name}={example}")


def _check_options(
    persist_concurrency: int, persist_timeout_s: float | PersistTimeout, media_part_bytes: int
) -> None:
    _check_positive_int("persist_concurrency", persist_concurrency, DEFAULT_PERSIST_CONCURRENCY)
    _check_positive_int("media_part_bytes", media_part_bytes, DEFAULT_MEDIA_PART_BYTES)
    if callable(persist_timeout_s):
        return  # asked when the pass first writes (a turn's one deadline across passes)
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
        persist_concurrency: how many files are written at once (a file renamed into
            place frees its slot while it waits for the directory fsync).
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
    persist_timeout_s: float | PersistTimeout = DEFAULT_PERSIST_TIMEOUT_S,
    media_part_bytes: int = DEFAULT_MEDIA_PART_BYTES,
) -> FinalizedTurn:
    """Bound a turn's responses and its own text (``hook_text``) together to ``budget``.

    :func:`finalize_tool_responses` with the turn's hook text beside the responses: each
    text is one slot of the same water-fill, cut like a response's output (one header
    naming its file) and saved once, when a pass first cuts it, under
    ``hook-text-<n>``. The two come back apart, each in the order given; nothing that
    fits is copied. ``persist_timeout_s`` may also be a function that gives it when the
    pass first writes (``PersistTimeout``: a turn's one deadline across its passes).
    """
    limit = effective_budget(budget)
    if (
        persist_concurrency is not DEFAULT_PERSIST_CONCURRENCY
        or media_part_bytes is not DEFAULT_MEDIA_PART_BYTES
        or (persist_timeout_s is not DEFAULT_PERSIST_TIMEOUT_S and not callable(persist_timeout_s))
    ):  # the defaults and a turn's own deadline are valid: checked only when given
        _check_options(persist_concurrency, persist_timeout_s, media_part_bytes)
    lifecycle = check_lifecycle_tools(lifecycle_tools)
    same = responses if isinstance(responses, list) else list(responses)
    hooks = hook_text if isinstance(hook_text, list) else list(hook_text)
    if limit is None:
        return FinalizedTurn(same, hooks)
    if len(same) == 1 and not hooks:
        # A one-call turn of one plain output that fits (the usual turn): what the general
        # pass finds, without its lists (``tests/finalize/test_one_response.py``).
        length = plain_output_length(same[0], lifecycle)
        if length is not None and length <= limit:
            return FinalizedTurn(same, hooks, length)
    writer = Writer(store, same, persist_concurrency, persist_timeout_s)
    return await _fit_budget(same, hooks, writer, limit, lifecycle, media_part_bytes)


async def _fit_budget(
    same: list[ToolCallResponse],
    hooks: list[HookText],
    writer: Writer,
    limit: int,
    lifecycle: frozenset[str],
    media_part_bytes: int,
) -> FinalizedTurn:
    # The media pass (which may await) runs only for a batch the measuring walk found media
    # in; it measures again only when the media pass changed a response. Measuring a small
    # batch allocates too little to be worth pausing the collector for.
    if len(same) > _SMALL_BATCH:
        with collector_paused():
            slots = measure_turn(same, hooks, lifecycle)
            # The usual turn, without media, is measured and planned in one synchronous
            # stretch.
            cuts = None if slots.media else plan_cuts(slots, limit)
    else:
        slots = measure_turn(same, hooks, lifecycle)
        cuts = None if slots.media else plan_cuts(slots, limit)
    if slots.media:
        checked = await check_media_parts(same, writer, media_part_bytes)
        with collector_paused():
            if checked is not same:
                same = checked
                slots = measure_turn(same, hooks, lifecycle)
            cuts = plan_cuts(slots, limit)
    assert cuts is not None
    if type(cuts) is int:
        return FinalizedTurn(same, hooks, cuts)  # it fits: its measured length
    assert isinstance(cuts, Cuts)
    with collector_paused():
        jobs = persistence_jobs(same, hooks, cuts, writer)
        if not jobs:  # nothing to write: fitted with no await since it was planned
            return finish_cuts(same, hooks, cuts, {}, limit)
    written = await writer.write_all(jobs)
    with collector_paused():
        return finish_cuts(same, hooks, cuts, written, limit)
