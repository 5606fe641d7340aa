"""Invariants of the finalizer and the send guard over random batches (hypothesis)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.finalize._support import (
    RecordingStore,
    budgeted_length,
    classified_slots,
    split_slots,
)
from tests.strategies import TOOL_NAMES, response_batches, scaled, texts, tool_call_responses
from toolbatch import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.finalize import (
    DEFAULT_LIFECYCLE_TOOLS,
    TRUNCATION_HEADER,
    enforce_send_budget,
    finalize_tool_responses,
    response_text_length,
)
from toolbatch.finalize._slots import (
    Slot,
    collect_slots,
    cut_slots,
    fit_slot,
    measure_batch,
    merge_fits,
    rebuild_parts,
    state_of,
)

# Batches of up to 50 responses with texts of many thousand code points are slow to
# build, not slow to finalize; the checks below are what these examples are for.
PROPERTY_SETTINGS = settings(
    max_examples=scaled(80), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
STORE_SETTINGS = settings(
    max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def finalize(
    batch: list[ToolCallResponse], budget: int, store: RecordingStore | None = None
) -> list[ToolCallResponse]:
    async def run() -> list[ToolCallResponse]:
        return await finalize_tool_responses(batch, budget=budget, store=store)

    return anyio.run(run)


def non_slot_shape(part: Part) -> object:
    """Everything about a part that finalization must leave alone."""
    if isinstance(part, FunctionResponsePart):
        return ("functionResponse", part.function_response.id, part.function_response.name)
    if isinstance(part, TextPart):
        return ("text",)
    return ("media", part)


def budgeted_slots(item: ToolCallResponse) -> list[tuple[str, str]]:
    return split_slots(item.parts, tool=item.name, success=item.status == "success")


def assert_bounded_and_preserved(
    batch: list[ToolCallResponse], finalized: list[ToolCallResponse], budget: int
) -> None:
    assert len(finalized) == len(batch)
    assert budgeted_length(finalized) <= budget
    for before, after in zip(batch, finalized, strict=True):
        assert (after.call_id, after.name, after.status) == (
            before.call_id,
            before.name,
            before.status,
        )
        assert len(after.parts) == len(before.parts)
        for old, new in zip(before.parts, after.parts, strict=True):
            assert type(new) is type(old)
            assert non_slot_shape(new) == non_slot_shape(old)
            if isinstance(old, InlineDataPart | FileDataPart):
                assert new is old
            if budgeted_slots_of(new) == budgeted_slots_of(old):
                assert new == old  # a part whose text was not cut keeps its shape
        assert after.content_length == response_text_length(after.parts)
        # Protected lifecycle output comes through unchanged.
        old_prefixes = [prefix for prefix, _ in budgeted_slots(before)]
        assert [prefix for prefix, _ in budgeted_slots(after)] == old_prefixes
        if before.persisted_output_files is not None:
            assert after.persisted_output_files == before.persisted_output_files


def budgeted_slots_of(part: Part) -> list[tuple[str, str]]:
    return split_slots([part], ())


def assert_no_nested_headers(finalized: list[ToolCallResponse]) -> None:
    for item in finalized:
        for _, text in budgeted_slots(item):
            # Strategy text never contains the header, so any second one would be nesting.
            assert text.count(TRUNCATION_HEADER) <= 1
            assert TRUNCATION_HEADER not in text[1:]


@PROPERTY_SETTINGS
@given(response_batches(), st.data())
def test_finalized_batches_fit_preserve_shape_and_are_idempotent(
    batch: list[ToolCallResponse], data: st.DataObject
) -> None:
    """Fits the budget, keeps order/parts/media, fair to small slots, deterministic, stable."""
    total = budgeted_length(batch)
    budget = data.draw(st.integers(1, total + 20), label="budget")
    assert finalize(batch, 0) is batch  # 0 disables the budget
    finalized = finalize(batch, budget)

    if total <= budget:
        assert finalized is batch
    assert_bounded_and_preserved(batch, finalized, budget)
    assert_no_nested_headers(finalized)

    # Slots no longer than the fair share of the whole budget keep their whole text.
    before_slots = [s for item in batch for s in budgeted_slots(item)]
    after_slots = [s for item in finalized for s in budgeted_slots(item)]
    floor_share = budget // max(1, len(before_slots))
    for old, new in zip(before_slots, after_slots, strict=True):
        if len(old[1]) <= floor_share:
            assert new == old

    # Deterministic: the same input gives the same output.
    assert finalize(batch, budget) == finalized

    # Idempotent: the same or a larger budget changes nothing at all.
    assert finalize(finalized, budget) is finalized
    assert finalize(finalized, budget + data.draw(st.integers(1, 10_000))) is finalized

    # A finalized batch passes the send guard untouched.
    parts = [part for item in finalized for part in item.parts]
    assert enforce_send_budget(parts, budget) is parts

    # A smaller budget shrinks previews without nesting and keeps decisions.
    smaller = data.draw(st.integers(1, budget), label="smaller")
    shrunk = finalize(finalized, smaller)
    assert_bounded_and_preserved(finalized, shrunk, smaller)
    assert_no_nested_headers(shrunk)


@PROPERTY_SETTINGS
@given(response_batches(max_size=20), st.data())
def test_the_send_guard_bounds_a_tool_message(
    batch: list[ToolCallResponse], data: st.DataObject
) -> None:
    """The message's text fits; media are the same objects; pure and stable."""
    parts = [part for item in batch for part in item.parts]
    total = sum(len(text) for _, text in split_slots(parts))
    budget = data.draw(st.integers(1, total + 20), label="budget")
    guarded = enforce_send_budget(parts, budget)
    if total <= budget:
        assert guarded is parts
    assert sum(len(text) for _, text in split_slots(guarded)) <= budget
    assert len(guarded) == len(parts)
    for old, new in zip(parts, guarded, strict=True):
        assert non_slot_shape(new) == non_slot_shape(old)
    assert enforce_send_budget(parts, budget) == guarded
    assert enforce_send_budget(guarded, budget) is guarded


@STORE_SETTINGS
@given(response_batches(max_size=12), st.data())
def test_each_response_is_persisted_at_most_once_over_repeated_passes(
    batch: list[ToolCallResponse], data: st.DataObject
) -> None:
    """Shrinking pass after pass writes each undecided response once, with its budgeted text."""
    total = budgeted_length(batch)
    budget = data.draw(st.integers(1, total + 20), label="budget")
    with tempfile.TemporaryDirectory() as directory:
        store = RecordingStore(Path(directory))
        current = batch
        for step in (budget, max(1, budget // 2), max(1, budget // 5), 1):
            current = finalize(current, step, store)
            assert budgeted_length(current) <= step
            assert_no_nested_headers(current)
        ids = [call_id for call_id, _, _ in store.calls]
        assert len(ids) == len(set(ids))
        assert len(ids) <= sum(1 for item in batch if item.persisted_output_files is None)
        for item, original in zip(current, batch, strict=True):
            if original.persisted_output_files is not None:
                assert item.persisted_output_files == original.persisted_output_files
            for path in item.persisted_output_files or ():
                assert path.exists() or path.is_relative_to("/artifacts")
        # Every write holds one response's budgeted text, joined by blank lines (protected
        # lifecycle output is not budgeted text at all).
        expected = {
            "\n\n".join(
                text
                for protected, text in classified_slots(
                    item.parts, tool=item.name, success=item.status == "success"
                )
                if not protected
            )
            for item in batch
            if item.persisted_output_files is None
        }
        assert {text for _, _, text in store.calls} <= expected


def reference_finalize(batch: list[ToolCallResponse], budget: int) -> list[ToolCallResponse]:
    """The text pass as the slot records state it, without a store: one Slot per string,
    fitted through its Excerpt, rebuilt with rebuild_parts, its state from merge_fits."""
    lifecycle = frozenset(DEFAULT_LIFECYCLE_TOOLS)
    slots_of = [
        collect_slots(
            item.parts,
            owner=owner,
            include_top_level_text=True,
            lifecycle=lifecycle,
            tool=item.name,
            success=item.status == "success",
            state=item.finalize_state,
        )
        for owner, item in enumerate(batch)
    ]
    slots = [slot for owned in slots_of for slot in owned]
    if sum(len(slot.text) for slot in slots) <= budget:
        return batch
    cut_by_owner: dict[int, list[tuple[Slot, int]]] = {}
    for slot, allocation in cut_slots(slots, budget):
        cut_by_owner.setdefault(slot.owner, []).append((slot, allocation))
    finalized = list(batch)
    for owner, owned in cut_by_owner.items():
        item = batch[owner]
        paths = [os.fspath(path) for path in item.persisted_output_files or ()]
        fits = [(slot, fit_slot(slot, allocation, paths=paths)) for slot, allocation in owned]
        state = state_of(item.finalize_state)
        merged = merge_fits(
            [slot.fitted for slot in slots_of[owner] if slot.fitted is not None],
            [fitted for _, fitted in fits],
            media_checked=state is not None and state.media_checked,
        )
        files = item.persisted_output_files
        finalized[owner] = item.model_copy(
            update={
                "parts": rebuild_parts(item.parts, fits),
                "persisted_output_files": () if files is None else files,
                "finalize_state": merged,
            }
        )
    return finalized


def without_media(batch: list[ToolCallResponse]) -> list[ToolCallResponse]:
    return [
        item.with_parts([part for part in item.parts if not isinstance(part, InlineDataPart)])
        for item in batch
    ]


@PROPERTY_SETTINGS
@given(response_batches(max_size=30), st.data())
def test_the_finalizer_writes_what_the_slot_records_state(
    batch: list[ToolCallResponse], data: st.DataObject
) -> None:
    """The plain-list pass (fast cut, one copy per response, compact state) gives the same
    parts, decisions and state as the record-based pipeline, in a first and a second pass."""
    batch = without_media(batch)
    total = budgeted_length(batch)
    budget = data.draw(st.integers(1, total + 20), label="budget")
    smaller = data.draw(st.integers(1, budget), label="smaller")
    current = batch
    for step in (budget, smaller):
        finalized = finalize(current, step)
        expected = reference_finalize(current, step)
        for new, old, want in zip(finalized, current, expected, strict=True):
            assert new.parts == want.parts
            assert new.persisted_output_files == want.persisted_output_files
            assert state_of(new.finalize_state) == state_of(want.finalize_state)
            if want is old:
                assert new is old  # an unchanged response is the same object
        current = finalized


def _plain_output(text: str, name: str) -> ToolCallResponse:
    return ToolCallResponse.from_result(ToolCall(id="c1", name=name), ToolResult(content=text))


_mixed_batches = st.lists(
    st.one_of(
        tool_call_responses(),
        st.builds(_plain_output, texts(max_repeat=20), st.sampled_from(TOOL_NAMES)),
    ),
    max_size=12,
)


def test_an_empty_lifecycle_output_is_not_written_with_the_cut_text() -> None:
    """The case Hypothesis found: a lifecycle tool's empty (protected) output is not budgeted
    text, so its file holds only the cut top-level text, as a shell call's holds both."""

    def response(name: str) -> ToolCallResponse:
        return ToolCallResponse.model_validate(
            {
                "call_id": "c1",
                "name": name,
                "parts": [
                    {"functionResponse": {"id": "c1", "name": name, "response": {"output": ""}}},
                    {"text": "00"},
                ],
            }
        )

    with tempfile.TemporaryDirectory() as directory:
        store = RecordingStore(Path(directory))
        finalize([response("run_shell_command"), response("enter_plan_mode")], 1, store)
    assert [(tool, text) for _, tool, text in store.calls] == [
        ("run_shell_command", "\n\n00"),
        ("enter_plan_mode", "00"),
    ]


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed_batches)
def test_the_batch_walk_finds_the_slots_collect_slots_finds(batch: list[ToolCallResponse]) -> None:
    """measure_batch (plain outputs read directly, places and ends written out only once
    another response comes) finds each response's slots as collect_slots does, in order."""
    slots = measure_batch(batch, DEFAULT_LIFECYCLE_TOOLS)
    texts_found: list[str] = []
    places: list[tuple[int, str, bool]] = []
    ends: list[int] = []
    for owner, response in enumerate(batch):
        found = collect_slots(
            response.parts,
            owner=owner,
            include_top_level_text=True,
            lifecycle=DEFAULT_LIFECYCLE_TOOLS,
            tool=response.name,
            success=response.status == "success",
        )
        texts_found += [slot.text for slot in found]
        places += [(slot.part, slot.field, slot.folded) for slot in found]
        ends.append(len(texts_found))
        part = response.parts[0] if len(response.parts) == 1 else None
        expected = (
            part.function_response
            if isinstance(part, FunctionResponsePart)
            and part.function_response.response.keys() == {"output"}
            and type(part.function_response.response["output"]) is str
            and len(found) == 1
            and response.finalize_state is None
            else None
        )
        assert slots.outputs[owner] is expected
    assert (slots.texts, slots.places, slots.ends) == (texts_found, places, ends)
    assert slots.one_each == (ends == list(range(1, len(batch) + 1)))
