"""Text slots: the model-facing strings a budget measures and may shorten.

For each part in order, the slots are a top-level ``text`` (when included), then a
function response's ``output`` and ``error``. A string is its own text. A structured
(non-string) ``output`` or ``error`` is measured as its compact JSON; the function
response's other keys are measured too, as the compact JSON of an object holding them,
joined to ``output`` by a newline (``toolbatch._core._wire.function_response_text_length`` is the
same measure). A response that fits its share keeps its shape; one that must be cut gets a
string preview of that text under ``output`` (or ``error``), its other keys folded in, so
nothing is dropped. A successful response of a lifecycle tool makes no slot at all. Pure:
no I/O, no async.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from toolbatch._core import (
    RESPONSE_TEXT_KEYS,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCallResponse,
    compact_json,
    model_text_length,
    replace_field,
    replace_function_response,
)
from toolbatch.finalize._allocation import allocate_budget
from toolbatch.finalize._fit import Excerpt, Preview, cut_ends, fit_excerpt

__all__ = [
    "FIRST_OUTPUT",
    "BatchSlots",
    "FinalizeState",
    "FittedSlot",
    "OutputCut",
    "Place",
    "Slot",
    "SlotField",
    "collect_slots",
    "cut_slots",
    "edit_parts",
    "fit_slot",
    "fitted_at",
    "measure_batch",
    "measure_slots",
    "merge_fits",
    "rebuild_parts",
    "response_text_length",
    "state_of",
]

SlotField: TypeAlias = Literal["text", "output", "error"]
Place: TypeAlias = tuple[int, SlotField, bool]
"""Where a slot's text sits: the part's index, the field, and whether the text is folded."""

FIRST_OUTPUT: Final[Place] = (0, "output", False)
"""The place of most slots (a tool's plain string output), shared rather than rebuilt."""
_MISSING: Final = object()
_MEDIA_PARTS: Final = (InlineDataPart, FileDataPart)


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


@dataclass(slots=True)
class OutputCut:
    """The usual ``finalize_state``: a preview of the first part's ``output``, cut from it whole.

    The finalizer writes one per cut response of that shape (most of them) instead of a
    :class:`FinalizeState` holding a :class:`FittedSlot` and an :class:`Excerpt`: the same
    fit, as four plain fields, read through :func:`state_of`. The head and tail the
    preview kept are read back from it by their sizes (``cut_ends``) rather than kept as
    two more strings per response.

    Attributes:
        text: the preview, exactly as written (by ``cut_text``).
        head_size: the length of the source's head it kept.
        tail_size: the length of the source's tail it kept.
        length: the source's length in code points.
    """

    text: str
    head_size: int
    tail_size: int
    length: int


def state_of(state: object) -> FinalizeState | None:
    """A response's ``finalize_state`` as the finalizer reads it.

    A producer's :class:`~toolbatch._core._preview.Preview` (``ToolResult.preview``, which the
    response carries until a finalizer pass replaces it) and an :class:`OutputCut` are the
    fit of the response's ``output``: a smaller cut starts from its excerpt instead of
    nesting a header.
    """
    if isinstance(state, FinalizeState):
        return state
    if isinstance(state, OutputCut):
        head, tail = cut_ends(state.text, state.head_size, state.tail_size, state.length)
        excerpt = Excerpt(head, tail, state.length)
        return FinalizeState((FittedSlot(0, "output", state.text, excerpt),))
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


def fitted_at(
    known: Mapping[tuple[int, SlotField], FittedSlot] | None,
    part: int,
    field: SlotField,
    text: str,
) -> FittedSlot | None:
    """The fit recorded for this place when the slot still holds exactly its preview."""
    if known is None:
        return None
    fitted = known.get((part, field))
    if fitted is None or len(fitted.text) != len(text) or fitted.text != text:
        return None
    return fitted


def _folded_text(body: Mapping[str, object]) -> str:
    """The output slot's text of a body with keys besides ``output`` and ``error``.

    The output (its compact JSON when structured), a newline and the compact JSON of an
    object holding the other keys; or that JSON alone when there is no output.
    """
    folded = compact_json(
        {key: value for key, value in body.items() if key not in RESPONSE_TEXT_KEYS}
    )
    if "output" not in body:
        return folded
    output = body["output"]
    text = output if isinstance(output, str) else compact_json(output)
    return text + "\n" + folded


def measure_slots(
    parts: Sequence[Part],
    texts: list[str],
    places: list[Place],
    *,
    include_top_level_text: bool,
    lifecycle: frozenset[str] = frozenset(),
    tool: str | None = None,
    success: bool = True,
) -> None:
    """Append the budgeted slots of one response's ``parts``, in order, to two plain lists.

    Each slot's text goes to ``texts`` and its place to ``places`` (the finalizer keeps a
    whole batch in these two lists; :func:`collect_slots` makes records of them).

    Args:
        parts: the response's parts (or a whole batch's, for the send guard).
        texts: where each slot's budgeted text is appended.
        places: where each slot's place is appended.
        include_top_level_text: whether top-level ``text`` parts are budgeted.
        lifecycle: tool names whose successful output stays inline, unbudgeted: a function
            response named for one of them, in a response of one of them when ``tool`` is
            given (the finalizer), so the send guard, which sees only parts, never counts
            what the finalizer exempted, and a part named otherwise is budgeted by both.
        tool: the response's tool name (``None``: the send guard, parts only).
        success: whether the response succeeded; a failed one is never exempt.
    """
    for index, part in enumerate(parts):
        if isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            body = function_response.response
            error = body.get("error", _MISSING)
            if (
                success
                and lifecycle
                and error is _MISSING
                and function_response.name in lifecycle
                and (tool is None or tool in lifecycle)
            ):
                continue
            output = body.get("output", _MISSING)
            if len(body) != (output is not _MISSING) + (error is not _MISSING):
                texts.append(_folded_text(body))  # other keys: folded into the output slot
                places.append((index, "output", True))
            elif isinstance(output, str):
                texts.append(output)
                places.append(FIRST_OUTPUT if index == 0 else (index, "output", False))
            elif output is not _MISSING:
                texts.append(compact_json(output))
                places.append((index, "output", True))
            if error is not _MISSING:
                if isinstance(error, str):
                    texts.append(error)
                    places.append((index, "error", False))
                else:
                    texts.append(compact_json(error))
                    places.append((index, "error", True))
        elif include_top_level_text and isinstance(part, TextPart):
            texts.append(part.text)
            places.append((index, "text", False))


@dataclass(slots=True)
class BatchSlots:
    """A batch's budgeted slots as plain lists (what :func:`measure_batch` returns).

    Attributes:
        texts: every slot's text, in batch order.
        places: every slot's place in its response.
        ends: per response, one past the index of its last slot.
        outputs: per response, its function response when the response is one function
            response holding only a string ``output`` (most are; that string is its one
            slot) and has no ``finalize_state`` (so a cut starts from that whole string),
            else ``None``.
        media: some response holds a media part (inline or a file reference) to check.
        one_each: every response has exactly one slot (slot i is response i's).
    """

    texts: list[str]
    places: list[Place]
    ends: list[int]
    outputs: list[FunctionResponse | None]
    media: bool
    one_each: bool


def measure_batch(responses: Sequence[ToolCallResponse], lifecycle: frozenset[str]) -> BatchSlots:
    """Every budgeted slot of a batch, as plain lists, in one walk over the responses.

    A response of one function response holding only a string ``output`` (most of them)
    is read directly; any other goes through :func:`measure_slots`, which states the rule.
    """
    texts: list[str] = []
    outputs: list[FunctionResponse | None] = []
    # While every response so far is one plain output (one slot each, at FIRST_OUTPUT), the
    # places and ends are implied: they are written out when the first other one comes.
    places: list[Place] | None = None
    ends: list[int] | None = None
    media = False
    one_each = True
    for response in responses:
        parts = response.parts
        if len(parts) == 1 and type(part := parts[0]) is FunctionResponsePart:
            function_response = part.function_response
            body = function_response.response
            if (
                len(body) == 1
                and type(output := body.get("output")) is str
                and (response.name not in lifecycle or response.status != "success")
            ):
                texts.append(output)
                outputs.append(function_response if response.finalize_state is None else None)
                if places is not None and ends is not None:
                    places.append(FIRST_OUTPUT)
                    ends.append(len(texts))
                continue
        elif not media:
            media = any(type(part) in _MEDIA_PARTS for part in parts)
        if places is None or ends is None:
            places, ends = _plain_outputs(len(texts))
        before = len(texts)
        measure_slots(
            parts,
            texts,
            places,
            include_top_level_text=True,
            lifecycle=lifecycle,
            tool=response.name,
            success=response.status == "success",
        )
        if len(texts) != before + 1:
            one_each = False
        ends.append(len(texts))
        outputs.append(None)
    if places is None or ends is None:
        places, ends = _plain_outputs(len(texts))
    return BatchSlots(texts, places, ends, outputs, media, one_each)


def plain_output_length(response: ToolCallResponse, lifecycle: frozenset[str]) -> int | None:
    """The budgeted length of a response of one plain string ``output`` (the case
    :func:`measure_batch` reads directly: its one slot), else ``None``."""
    parts = response.parts
    if len(parts) == 1 and type(part := parts[0]) is FunctionResponsePart:
        body = part.function_response.response
        if (
            len(body) == 1
            and type(output := body.get("output")) is str
            and (response.name not in lifecycle or response.status != "success")
        ):
            return len(output)
    return None


def _plain_outputs(count: int) -> tuple[list[Place], list[int]]:
    """The places and ends of ``count`` responses of one plain output each."""
    return [FIRST_OUTPUT] * count, list(range(1, count + 1))


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
    texts: list[str] = []
    places: list[Place] = []
    measure_slots(
        parts,
        texts,
        places,
        include_top_level_text=include_top_level_text,
        lifecycle=lifecycle,
        tool=tool,
        success=success,
    )
    read = state_of(state)
    known = read.lookup() if read is not None and read.fitted else None
    return [
        Slot(owner, part, field, text, folded, fitted_at(known, part, field, text))
        for text, (part, field, folded) in zip(texts, places, strict=True)
    ]


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
    """A new list of parts with the fitted strings in place (see :func:`edit_parts`)."""
    return edit_parts(
        parts, [((slot.part, slot.field, slot.folded), fitted.text) for slot, fitted in fits]
    )


def edit_parts(parts: Sequence[Part], edits: Iterable[tuple[Place, str]]) -> list[Part]:
    """A new list of parts with each ``(place, text)`` edit's string in place, in slot order.

    Only the parts that changed are copied (shallowly: the part, its function response and
    its response dict); every other part, media included, is the same object. A cut
    folded ``output`` drops the keys it folded in (their text is in the preview's source).
    A part with two edits (``output`` and ``error``) is copied once per edit.
    """
    rebuilt = list(parts)
    for (index, field, folded), text in edits:
        rebuilt[index] = _edited(rebuilt[index], field, folded, text)
    return rebuilt


def _edited(part: Part, field: SlotField, folded: bool, text: str) -> Part:
    if isinstance(part, FunctionResponsePart):
        function_response = part.function_response
        if folded and field == "output":
            body = {
                key: value
                for key, value in function_response.response.items()
                if key in RESPONSE_TEXT_KEYS
            }
        else:
            body = function_response.response.copy()
        body[field] = text
        return replace_function_response(part, body)
    if isinstance(part, TextPart):
        return replace_field(part, "text", text)
    return part


def merge_fits(
    earlier: Sequence[FittedSlot], fits: Iterable[FittedSlot], *, media_checked: bool
) -> FinalizeState:
    """The new state from ``earlier`` fits whose slot still holds them and this pass's ``fits``
    (in slot order): one fit per place, this pass's where both have one, in place order."""
    if not earlier:
        return FinalizeState(tuple(fits), media_checked)  # fits come in slot order
    new = {(fitted.part, fitted.field): fitted for fitted in fits}
    for fitted in earlier:
        new.setdefault((fitted.part, fitted.field), fitted)
    return FinalizeState(tuple(new[key] for key in sorted(new)), media_checked)
