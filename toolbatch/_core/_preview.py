"""The one preview format: a header, where the full output is, a head and a tail.

Every layer that shortens output for the model (the shell producer, MCP results, generic
persistence of a Python tool's text, the finalizer) writes the same shape::

    Tool output truncated.
    Full output: /artifacts/.../call_1-run_shell_command.txt
    <notes: why it was not saved, how to read it>

    <head: about a fifth>
    [... 1,234,567 characters omitted ...]
    <tail: the rest, so the end stays visible>
    <trailer: what must stay last, e.g. a command's exit line>

A preview comes with the :class:`Excerpt` it kept, so a later, smaller cut (the finalizer
sharing the batch budget) shortens it from the same head and tail instead of nesting a
second header around the first. Pure string work: no I/O, no async. A preview is never
longer than its limit, never splits a code point and never separates a surrogate pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from toolbatch._core._text import safe_prefix, safe_suffix

__all__ = [
    "ARTIFACT_LINE_PREFIX",
    "HEAD_DIVISOR",
    "PREVIEW_SEPARATOR",
    "TRUNCATION_HEADER",
    "Excerpt",
    "Preview",
    "TextCutter",
    "Unit",
    "cut_ends",
    "cut_text",
    "fit_excerpt",
    "fit_text",
    "make_preview",
    "omission_marker",
    "unsaved_note",
]

TRUNCATION_HEADER: Final = "Tool output truncated."
ARTIFACT_LINE_PREFIX: Final = "\nFull output: "
"""Each artifact path is one header line: this prefix, then the path, listed whole."""
PREVIEW_SEPARATOR: Final = "\n\n"
HEAD_DIVISOR: Final = 5
"""The head keeps ``content // HEAD_DIVISOR`` characters (about 20%), the tail the rest."""

Unit: TypeAlias = Literal["characters", "bytes"]
"""What an excerpt's ``length`` and the omission marker count. A command's output is
counted in bytes (it may never pass through Python whole); text in code points."""


def omission_marker(omitted: int, unit: Unit = "characters") -> str:
    """The line between head and tail, naming how much was left out."""
    return f"\n[... {omitted:,} {unit} omitted ...]\n"


_MARKER_CHARS: Final = len(omission_marker(0)) - 1
"""The omission marker's length in characters, less the digits of its count."""
_HEADER_CHARS: Final = len(TRUNCATION_HEADER)
_SEPARATOR_CHARS: Final = len(PREVIEW_SEPARATOR)
_LOW: Final = "\udc00"
_LOW_END: Final = "\udfff"
"""The low surrogates: a cut just before one may separate it from its high surrogate."""


def unsaved_note(reason: str) -> str:
    """The header line of a preview whose full output is in no file, saying why."""
    return f"The full output was not saved: {reason}."


def _measure(text: str, unit: Unit) -> int:
    if unit == "characters":
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What is known of a source text: a prefix, a suffix and the whole length.

    A complete text is ``Excerpt(text, text, len(text))``. A fit returns the excerpt it
    kept, so a later, smaller fit can be cut from it without nesting a second header and
    with the same result a fit of the complete text would give.

    Attributes:
        head: a prefix of the source.
        tail: a suffix of the source.
        length: the source's length in ``unit``.
        unit: what ``length`` counts.
        notes: header lines after the artifact paths (why the output was not saved, how
            to read the file), part of every preview of this source.
        trailer: text every preview ends with when it fits, on a line of its own (a
            command's exit line).
    """

    head: str
    tail: str
    length: int
    unit: Unit = "characters"
    notes: tuple[str, ...] = ()
    trailer: str = ""

    @classmethod
    def of(cls, text: str) -> Excerpt:
        """The excerpt of a complete text (no copy: both ends are the text itself)."""
        return cls(text, text, len(text))

    def keeping(self, head: str, tail: str) -> Excerpt:
        """The same source, with less of it kept."""
        return Excerpt(head, tail, self.length, self.unit, self.notes, self.trailer)


@dataclass(frozen=True, slots=True)
class Preview:
    """A producer's preview and the excerpt it kept (see the module docstring).

    A producer returns it as ``ToolResult.preview`` when its text ``content`` is exactly
    ``text``; the finalizer then cuts a smaller preview from ``excerpt``.
    """

    text: str
    excerpt: Excerpt


def _header(paths: Sequence[str], notes: Sequence[str], limit: int) -> str:
    if not paths and not notes:
        return TRUNCATION_HEADER
    header = TRUNCATION_HEADER
    for line in [ARTIFACT_LINE_PREFIX + path for path in paths] + ["\n" + note for note in notes]:
        if len(header) + len(line) <= limit:
            header += line
    return header


def fit_excerpt(source: Excerpt, limit: int, *, paths: Sequence[str] = ()) -> tuple[str, Excerpt]:
    """A preview of ``source`` of at most ``limit`` code points, and the excerpt it keeps.

    The preview is ``Tool output truncated.``, one ``Full output: <path>`` line per path
    that fits whole (in order), the source's note lines that fit, a blank line, a head of
    about 20% of the remaining room, an omission marker line, a tail of about 80% and the
    source's trailer (kept before any of the output: it says how the output ended). Small
    limits degrade to a head-only preview, then drop the trailer, then the bare header, then
    a cut header, then ``""``. A preview is the limit long, or a
    few code points shorter (a cut moved off a surrogate pair, or an omitted count with
    fewer digits than the source length it was sized for). Ends taken from an excerpt never
    reach past what it holds, so a preview cut from one may be shorter still.

    ``source`` must not fit ``limit`` (use :func:`fit_text` for text that might).
    """
    preview, head, tail = _fit(source, limit, paths)
    return preview, source.keeping(head, tail)


def cut_text(text: str, limit: int, paths: Sequence[str] = ()) -> tuple[str, str, str]:
    """The preview of a complete ``text`` that does not fit ``limit``, with the ends it kept.

    The same preview as ``fit_excerpt(Excerpt.of(text), limit, paths=paths)`` (no notes, no
    trailer, counted in characters), without making either excerpt: returns ``(preview,
    head, tail)``, so a caller that keeps the excerpt builds it once (the finalizer's hot
    path, one call per cut slot).
    """
    # Written for speed (one call per cut slot of a batch): no min/max, constant lengths.
    if limit <= _HEADER_CHARS:
        return (TRUNCATION_HEADER[:limit] if limit > 0 else ""), "", ""
    if paths:
        header = _header(paths, (), limit)
        room = limit - len(header) - _SEPARATOR_CHARS
        if room <= 0:
            return header, "", ""
    else:
        header = TRUNCATION_HEADER
        room = limit - _HEADER_CHARS - _SEPARATOR_CHARS
    length = len(text)
    digits = len(str(length))
    content = room - _MARKER_CHARS - digits - (digits - 1) // 3  # less the marker's room
    if content > 0:
        head_size = content // HEAD_DIVISOR
        # safe_suffix and safe_prefix, inline.
        start = length - (content - head_size)
        if start <= 0:
            start = 0
        elif start < length and _LOW <= text[start] <= _LOW_END and _is_high(text[start - 1]):
            start += 1
        if start < length:
            tail = text[start:]
            if head_size >= length:
                head_size = length
            elif head_size > 0 and _LOW <= text[head_size] <= _LOW_END:
                head_size -= _is_high(text[head_size - 1])
            head = text[:head_size]
            omitted = start - head_size if start > head_size else 0
            # header + PREVIEW_SEPARATOR + head + omission_marker(omitted) + tail, built once
            preview = f"{header}\n\n{head}\n[... {omitted:,} characters omitted ...]\n{tail}"
            return preview, head, tail
    head = safe_prefix(text, room)
    return (header + PREVIEW_SEPARATOR + head if head else header), head, ""


_Layout: TypeAlias = tuple[int, int, int, str]
"""Where a cut of a text of some length into some room falls: the head's size, where the
tail starts, the tail's size and the omission marker between head and tail."""
_IRREGULAR: Final = (0, 0, 0, "")
"""The layout memo's entry for a cut that keeps no tail (left to :func:`cut_text`)."""
_PLAIN_PREFIX: Final = TRUNCATION_HEADER + PREVIEW_SEPARATOR
_PLAIN_CHARS: Final = len(_PLAIN_PREFIX)


class TextCutter:
    """:func:`cut_text` for many texts at once (one batch), with each layout worked out once.

    A batch's cut slots share a few limits (the water-fill gives every cut slot the same
    share, or one more) and often a few lengths, so where the head ends, where the tail
    starts and the omission marker depend on the (length, room) pair alone; the cutter
    keeps them and makes each preview with two slices and one concatenation. A cut that
    would land on a surrogate pair, or keeps no tail, is left to :func:`cut_text`, so
    every preview is exactly the one :func:`cut_text` writes.
    """

    __slots__ = ("_rooms",)

    def __init__(self) -> None:
        self._rooms: dict[int, dict[int, _Layout]] = {}
        """The layouts worked out so far, by room, then by length."""

    def cut(self, text: str, limit: int, paths: Sequence[str] = ()) -> tuple[str, int, int]:
        """``cut_text(text, limit, paths)``'s preview, with the sizes of its head and tail.

        ``text`` must not fit ``limit``.
        """
        if limit <= _HEADER_CHARS:
            return (TRUNCATION_HEADER[:limit] if limit > 0 else ""), 0, 0
        if paths:
            header = _header(paths, (), limit)
            room = limit - len(header) - _SEPARATOR_CHARS
            prefix = header + PREVIEW_SEPARATOR
        else:
            room = limit - _HEADER_CHARS - _SEPARATOR_CHARS
            prefix = _PLAIN_PREFIX
        length = len(text)
        by_length = self._rooms.setdefault(room, {})
        layout = by_length.get(length)
        if layout is None:
            layout = by_length[length] = _layout(length, room)
        head_size, start, tail_size, marker = layout
        if (
            start
            and not _LOW <= text[start] <= _LOW_END
            and not (head_size and _LOW <= text[head_size] <= _LOW_END)
        ):
            return f"{prefix}{text[:head_size]}{marker}{text[start:]}", head_size, tail_size
        preview, head, tail = cut_text(text, limit, paths)
        return preview, len(head), len(tail)

    def cut_all(
        self,
        texts: Sequence[str],
        limits: Sequence[int],
        picks: Iterable[int],
        paths: Sequence[Sequence[str]] | None = None,
    ) -> tuple[list[str], list[int], list[int]]:
        """:meth:`cut` of ``texts[i]`` into ``limits[i]`` for each ``i`` in ``picks``, in one loop.

        Returns the previews and the sizes of the heads and tails they kept, in pick order.
        ``paths``, when given, holds each pick's artifact paths (``None``: no paths at all).
        Every picked text must not fit its limit.
        """
        if paths is not None:
            cut = self.cut
            previews, heads, tails = [], [], []
            for index, names in zip(picks, paths, strict=True):
                preview, head_size, tail_size = cut(texts[index], limits[index], names)
                previews.append(preview)
                heads.append(head_size)
                tails.append(tail_size)
            return previews, heads, tails
        # The usual batch (no artifact paths): the one header, each layout looked up here,
        # by length among those of the room the last slot had (most slots share a room).
        previews, heads, tails = [], [], []
        add_preview, add_head, add_tail = previews.append, heads.append, tails.append
        limit = -1  # none seen yet (a slot limited to -1 still gets cut_text's cut)
        by_length: dict[int, _Layout] = {}
        for index in picks:
            text = texts[index]
            length = len(text)
            if limits[index] != limit:
                limit = limits[index]
                by_length = self._rooms.setdefault(limit - _PLAIN_CHARS, {})
            layout = by_length.get(length)
            if layout is None:
                layout = by_length[length] = _layout(length, limit - _PLAIN_CHARS)
            head_size, start, tail_size, marker = layout
            if start and (
                text.isascii()  # no surrogates to check (the usual tool output; O(1))
                or (
                    not _LOW <= text[start] <= _LOW_END
                    and not (head_size and _LOW <= text[head_size] <= _LOW_END)
                )
            ):
                add_preview(f"{_PLAIN_PREFIX}{text[:head_size]}{marker}{text[start:]}")
                add_head(head_size)
                add_tail(tail_size)
            else:
                preview, head, tail = cut_text(text, limit)
                add_preview(preview)
                add_head(len(head))
                add_tail(len(tail))
        return previews, heads, tails


def _layout(length: int, room: int) -> _Layout:
    """:func:`cut_text`'s cut of a ``length``-long text into ``room`` (before any move off a
    surrogate pair), or :data:`_IRREGULAR` when it keeps no tail."""
    digits = len(str(length))
    content = room - _MARKER_CHARS - digits - (digits - 1) // 3
    if content <= 0:
        return _IRREGULAR
    head_size = content // HEAD_DIVISOR
    start = length - (content - head_size)
    if not head_size < start < length:  # a text that fits its room: cut_text's business
        return _IRREGULAR
    return head_size, start, length - start, omission_marker(start - head_size)


def cut_ends(preview: str, head_size: int, tail_size: int, length: int) -> tuple[str, str]:
    """The head and the tail a :func:`cut_text` preview of a ``length``-long text holds.

    Read back from the preview by their sizes, so a caller that keeps the preview needs
    to keep only the two sizes (the finalizer keeps them for every cut slot).
    """
    if not tail_size:  # a head-only preview ends with its head
        return (preview[len(preview) - head_size :] if head_size else ""), ""
    tail_start = len(preview) - tail_size
    head_end = tail_start - len(omission_marker(max(length - head_size - tail_size, 0)))
    return preview[head_end - head_size : head_end], preview[tail_start:]


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _fit(source: Excerpt, limit: int, paths: Sequence[str]) -> tuple[str, str, str]:
    """:func:`fit_excerpt`'s preview, with the head and the tail it kept."""
    length, unit, trailer = source.length, source.unit, source.trailer
    if limit <= 0:
        return "", "", ""
    if len(TRUNCATION_HEADER) >= limit:
        return TRUNCATION_HEADER[:limit], "", ""
    header = _header(paths, source.notes, limit)
    room = limit - len(header) - len(PREVIEW_SEPARATOR)
    if room <= 0:
        return header, "", ""
    if trailer and not trailer.startswith("\n"):
        trailer = "\n" + trailer  # the trailer starts its own line, whatever ends before it
    if len(trailer) > room:
        trailer = ""
    room -= len(trailer)
    marker_room = len(omission_marker(length, unit))
    head_size, tail = 0, ""
    if room > marker_room:
        content = room - marker_room
        head_size = content // HEAD_DIVISOR
        tail = safe_suffix(source.tail, content - head_size)
    if not tail:
        # No room for a marker and a tail (or an excerpt without one): the head alone.
        head = safe_prefix(source.head, room)
        if trailer and (not head or head.endswith("\n")):
            trailer = trailer[1:]
        body = PREVIEW_SEPARATOR + head + trailer if head or trailer else ""
        return header + body, head, ""
    head = safe_prefix(source.head, head_size)
    if unit == "characters":
        omitted = length - len(head) - len(tail)
    else:
        omitted = length - _measure(head, unit) - _measure(tail, unit)
    marker = omission_marker(max(omitted, 0), unit)
    if trailer and tail.endswith("\n"):
        trailer = trailer[1:]
    return header + PREVIEW_SEPARATOR + head + marker + tail + trailer, head, tail


def fit_text(text: str, limit: int, *, paths: Sequence[str] = ()) -> str:
    """``text`` itself when it fits ``limit``, else its preview (see :func:`fit_excerpt`)."""
    if len(text) <= limit:
        return text
    return cut_text(text, limit, paths)[0]


def make_preview(source: Excerpt, limit: int, *, paths: Sequence[str] = ()) -> Preview:
    """A producer's preview of ``source`` in at most ``limit`` code points."""
    text, kept = fit_excerpt(source, limit, paths=paths)
    return Preview(text, kept)
