"""Text slots: the model-facing strings a budget measures and may shorten.

For each part in order, the slots are a top-level ``text`` (when included), then a
function response's ``output`` and ``error``. A string is its own text. A structured
(non-string) ``output`` or ``error`` is measured as its compact JSON; the function
response's other keys are measured too, as the compact JSON of an object holding them,
joined to ``output`` by a newline (``toolbatch._wire.function_response_text_length`` is the
same measure). A response that fits its share keeps its shape; one that must be cut gets a
string preview of that text under ``output`` (or ``error``), its other keys folded in, so
nothing is dropped. A successful response of a lifecycle tool makes no slot at all. Pure:
no I/O, no async.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from toolbatch._wire import (
    RESPONSE_TEXT_KEYS,
    FunctionResponsePart,
    Part,
    TextPart,
    compact_json,
    model_text_length,
    replace_fields,
)
from toolbatch.finalize._allocation import allocate_budget
from toolbatch.finalize._fit import Excerpt, Preview, fit_excerpt

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
    "state_of",
]

SlotField: TypeAlias = Literal["text", "output", "error"]


def response_text_length(parts: Sequence[Part]) -> int:
    """Code points of all model-facing text in ``parts`` (what ``content_length`` holds).

    Counts top-level ``text`` and every function-response value (strings as they are,
    anything else as compact JSON); media count nothing.
    """
    return model_text_length(parts)


@dataclass(frozen=True, slots=True)
class FittedSlot:
    """A slot holding a preview the finalizer made.

    Attributes:
        part: the part's index in the response.
        field: which string of the part.
        text: the preview, exactly as written.
        excerpt: what the preview kept of its source, to cut a smaller preview from.
    """

    part: int
    field: SlotField
    text: str
    excerpt: Excerpt


@dataclass(frozen=True, slots=True)
class FinalizeState:
    """What ``ToolCallResponse.finalize_state`` holds.

    Attributes:
        fitted: the response's fitted slots.
        media_checked: its media parts were checked (and saved) by a finalizer pass.
    """

    fitted: tuple[FittedSlot, ...] = ()
    media_checked: bool = False

    def lookup(self) -> dict[tuple[int, SlotField], FittedSlot]:
        """The fitted slots by (part index, field)."""
        return {(slot.part, slot.field): slot for slot in self.fitted}


def state_of(state: object) -> FinalizeState | None:
    """A response's ``finalize_state`` as the finalizer reads it.

    A producer's :class:`~toolbatch._preview.Preview` (``ToolResult.preview``, which the
    response carries until a finalizer pass replaces it) is the fit of the response's
    ``output``: a smaller cut starts from its excerpt instead of nesting a header.
    """
    if isinstance(state, FinalizeState):
        return state
    if isinstance(state, Preview):
        return FinalizeState((FittedSlot(0, "output", state.text, state.excerpt),))
    return None


@dataclass(slots=True)
class Slot:
    """One budgeted string of one response.

    Attributes:
        owner: the response's index in the batch.
        part: the part's index in the response.
        field: which string of the part.
        text: the budgeted text.
        folded: ``text`` is not the field's value as it stands (a structured value as
            JSON, or other keys folded into ``output``): cutting it reshapes the response.
        fitted: the preview this text is, when the finalizer made it (checked, not trusted).
    """

    owner: int
    part: int
    field: SlotField
    text: str
    folded: bool = False
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


def _output_text(body: Mapping[str, object]) -> tuple[str, bool] | None:
    """The output slot's text and whether it is folded, or ``None`` when there is none."""
    others = [key for key in body if key not in RESPONSE_TEXT_KEYS]
    has_output = "output" in body
    output = body.get("output")
    if not others:
        if not has_output:
            return None
        if isinstance(output, str):
            return output, False
        return compact_json(output), True
    folded = compact_json({key: body[key] for key in others})
    if not has_output:
        return folded, True
    text = output if isinstance(output, str) else compact_json(output)
    return text + "\n" + folded, True


def collect_slots(
    parts: Sequence[Part],
    *,
    owner: int,
    include_top_level_text: bool,
    lifecycle: frozenset[str] = frozenset(),
    tool: str | None = None,
    success: bool = True,
    state: object = None,
) -> list[Slot]:
    """The budgeted slots of one response's ``parts``, in order.

    Args:
        parts: the response's parts (or a whole batch's, for the send guard).
        owner: the index written into each slot.
        include_top_level_text: whether top-level ``text`` parts are budgeted.
        lifecycle: tool names whose successful output stays inline, unbudgeted.
        tool: the response's tool name (``None``: each function response's own name).
        success: whether the response succeeded; a failed one is never exempt.
        state: the response's ``finalize_state``.
    """
    read = state_of(state)
    known = read.lookup() if read is not None and read.fitted else None
    slots: list[Slot] = []
    for index, part in enumerate(parts):
        if isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            body = function_response.response
            if (
                success
                and lifecycle
                and "error" not in body
                and (tool if tool is not None else function_response.name) in lifecycle
            ):
                continue
            output = _output_text(body)
            if output is not None:
                text, folded = output
                fitted = _fitted(known, index, "output", text)
                slots.append(Slot(owner, index, "output", text, folded, fitted))
            if "error" in body:
                error = body["error"]
                folded = not isinstance(error, str)
                text = error if isinstance(error, str) else compact_json(error)
                slots.append(
                    Slot(owner, index, "error", text, folded, _fitted(known, index, "error", text))
                )
        elif include_top_level_text and isinstance(part, TextPart):
            text = part.text
            slots.append(
                Slot(owner, index, "text", text, False, _fitted(known, index, "text", text))
            )
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
    its response dict); every other part, media included, is the same object. A cut
    folded ``output`` drops the keys it folded in (their text is in the preview's source).
    """
    changes: dict[int, list[tuple[Slot, FittedSlot]]] = {}
    for slot, fitted in fits:
        changes.setdefault(slot.part, []).append((slot, fitted))
    rebuilt = list(parts)
    for index, edits in changes.items():
        part = rebuilt[index]
        if isinstance(part, TextPart):
            [(_, fitted)] = edits
            rebuilt[index] = replace_fields(part, text=fitted.text)
        elif isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            response = dict(function_response.response)
            for slot, fitted in edits:
                if slot.field == "output" and slot.folded:
                    response = {k: v for k, v in response.items() if k in RESPONSE_TEXT_KEYS}
                response[slot.field] = fitted.text
            rebuilt[index] = replace_fields(
                part, function_response=replace_fields(function_response, response=response)
            )
    return rebuilt


def merge_state(
    slots: Iterable[Slot], fits: Iterable[FittedSlot], *, media_checked: bool
) -> FinalizeState:
    """A response's new ``finalize_state``: its new fits plus earlier ones still in place.

    ``slots`` are the response's slots as collected (their ``fitted`` already checked
    against the current text); ``fits`` are the fits made in this pass.
    """
    earlier = [slot.fitted for slot in slots if slot.fitted is not None]
    if not earlier:
        return FinalizeState(tuple(fits), media_checked)  # fits come in slot order
    new = {(fitted.part, fitted.field): fitted for fitted in fits}
    for fitted in earlier:
        new.setdefault((fitted.part, fitted.field), fitted)
    return FinalizeState(tuple(new[key] for key in sorted(new)), media_checked)
