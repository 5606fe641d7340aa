"""Text slots: the model-facing strings a budget measures and may shorten.

For each part in order, the slots are a top-level ``text`` (when included), then
``functionResponse.response.output`` and ``.error`` when they are strings. Nothing else is
counted or changed. Pure: no I/O, no async.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolbatch._wire import FunctionResponsePart, Part, TextPart, model_text_length
from toolbatch.finalize._allocation import allocate_budget
from toolbatch.finalize._fit import Excerpt, fit_excerpt
from toolbatch.finalize._lifecycle import protected_prefix_length

__all__ = [
    "FinalizeState",
    "FittedSlot",
    "Slot",
    "SlotField",
    "collect_slots",
    "cut_slots",
    "fit_slot",
    "merge_state",
    "rebuild_parts",
    "response_text_length",
]

SlotField: TypeAlias = Literal["text", "output", "error"]


def response_text_length(parts: Sequence[Part]) -> int:
    """Code points of all model-facing text in ``parts``, protected reminders included.

    Counts top-level ``text`` and string ``functionResponse.response.output`` / ``.error``;
    media and every other value count nothing. This is what ``content_length`` holds.
    """
    return model_text_length(parts if isinstance(parts, list) else list(parts))


@dataclass(frozen=True, slots=True)
class FittedSlot:
    """A slot holding a preview the finalizer made.

    Attributes:
        part: the part's index in the response.
        field: which string of the part.
        text: the preview, exactly as written (without any protected reminder before it).
        excerpt: what the preview kept of its source, to cut a smaller preview from.
    """

    part: int
    field: SlotField
    text: str
    excerpt: Excerpt


@dataclass(frozen=True, slots=True)
class FinalizeState:
    """What ``ToolCallResponse.finalize_state`` holds: the response's fitted slots."""

    fitted: tuple[FittedSlot, ...]

    def lookup(self) -> dict[tuple[int, SlotField], FittedSlot]:
        """The fitted slots by (part index, field)."""
        return {(slot.part, slot.field): slot for slot in self.fitted}


@dataclass(slots=True)
class Slot:
    """One budgeted string of one response.

    Attributes:
        owner: the response's index in the batch.
        part: the part's index in the response.
        field: which string of the part.
        prefix: protected text kept inline before the slot (a lifecycle reminder), or ``""``.
        text: the budgeted text.
        fitted: the preview this text is, when the finalizer made it (checked, not trusted).
    """

    owner: int
    part: int
    field: SlotField
    prefix: str
    text: str
    fitted: FittedSlot | None = None


def _fitted(
    known: Mapping[tuple[int, SlotField], FittedSlot] | None,
    part: int,
    field: SlotField,
    text: str,
) -> FittedSlot | None:
    if known is None:
        return None
    fitted = known.get((part, field))
    if fitted is None or len(fitted.text) != len(text) or fitted.text != text:
        return None
    return fitted


def collect_slots(
    parts: Sequence[Part],
    *,
    owner: int,
    include_top_level_text: bool,
    reminders: Mapping[str, tuple[str, ...]],
    state: object = None,
) -> list[Slot]:
    """The budgeted slots of one response's ``parts``, in order.

    A successful ``output`` (its response has no ``error``) of a protected tool that equals
    one of its reminders makes no slot; one that starts with a reminder and a blank line
    keeps that prefix outside the slot. ``state`` is the response's ``finalize_state``.
    """
    known = state.lookup() if isinstance(state, FinalizeState) else None
    slots: list[Slot] = []
    for index, part in enumerate(parts):
        if isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            response = function_response.response
            output = response.get("output")
            error = response.get("error")
            if isinstance(output, str):
                protected = 0
                if error is None and function_response.name in reminders:
                    protected = protected_prefix_length(function_response.name, output, reminders)
                if protected == 0 or protected < len(output):
                    text = output[protected:] if protected else output
                    slots.append(
                        Slot(
                            owner,
                            index,
                            "output",
                            output[:protected],
                            text,
                            _fitted(known, index, "output", text),
                        )
                    )
            if isinstance(error, str):
                slots.append(
                    Slot(owner, index, "error", "", error, _fitted(known, index, "error", error))
                )
        elif include_top_level_text and isinstance(part, TextPart):
            text = part.text
            slots.append(Slot(owner, index, "text", "", text, _fitted(known, index, "text", text)))
    return slots


def cut_slots(slots: Sequence[Slot], budget: int) -> list[tuple[Slot, int]]:
    """The slots the water-fill cuts, each with its allocation, in slot order."""
    allocation = allocate_budget([len(slot.text) for slot in slots], budget)
    return [
        (slot, limit)
        for slot, limit in zip(slots, allocation, strict=True)
        if len(slot.text) > limit
    ]


def fit_slot(slot: Slot, limit: int, *, paths: Sequence[str] = ()) -> FittedSlot:
    """Fit a cut slot into ``limit``, from its excerpt when it already holds a preview.

    Re-fitting a preview gives the same text as fitting the original output (with the same
    paths), so repeated passes never nest headers.
    """
    source = slot.fitted.excerpt if slot.fitted is not None else Excerpt.of(slot.text)
    text, kept = fit_excerpt(source, limit, paths=paths)
    return FittedSlot(slot.part, slot.field, text, kept)


def rebuild_parts(parts: Sequence[Part], fits: Iterable[tuple[Slot, FittedSlot]]) -> list[Part]:
    """A new list of parts with the fitted strings in place.

    Only the parts that changed are copied (shallowly: the part, its function response and
    its response dict); every other part, media included, is the same object.
    """
    changes: dict[int, list[tuple[Slot, FittedSlot]]] = {}
    for slot, fitted in fits:
        changes.setdefault(slot.part, []).append((slot, fitted))
    rebuilt = list(parts)
    for index, edits in changes.items():
        part = rebuilt[index]
        if isinstance(part, TextPart):
            [(_, fitted)] = edits
            rebuilt[index] = part.model_copy(update={"text": fitted.text})
        elif isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            response = dict(function_response.response)
            for slot, fitted in edits:
                response[slot.field] = slot.prefix + fitted.text
            rebuilt[index] = part.model_copy(
                update={
                    "function_response": function_response.model_copy(update={"response": response})
                }
            )
    return rebuilt


def merge_state(slots: Iterable[Slot], fits: Iterable[FittedSlot]) -> FinalizeState:
    """A response's new ``finalize_state``: its new fits plus earlier ones still in place.

    ``slots`` are the response's slots as collected (their ``fitted`` already checked
    against the current text); ``fits`` are the fits made in this pass.
    """
    new = {(fitted.part, fitted.field): fitted for fitted in fits}
    for slot in slots:
        if slot.fitted is not None:
            new.setdefault((slot.part, slot.field), slot.fitted)
    return FinalizeState(tuple(new[key] for key in sorted(new)))
