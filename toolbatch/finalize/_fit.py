"""Fitting one text slot into its allocation: a header, artifact paths, a head and a tail.

Pure string work: no I/O, no async. A fit is never longer than its allocation, never splits
a code point (Python slicing cannot) and never separates a high surrogate from the low
surrogate that follows it (Python strings may hold surrogate code points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from toolbatch._text import safe_prefix, safe_suffix

__all__ = [
    "ARTIFACT_LINE_PREFIX",
    "HEAD_DIVISOR",
    "PREVIEW_SEPARATOR",
    "TRUNCATION_HEADER",
    "Excerpt",
    "fit_excerpt",
    "fit_text",
    "omission_marker",
]

TRUNCATION_HEADER: Final = "Tool output truncated."
ARTIFACT_LINE_PREFIX: Final = "\nFull output: "
"""Each artifact path is one header line: this prefix, then the path, listed whole."""
PREVIEW_SEPARATOR: Final = "\n\n"
HEAD_DIVISOR: Final = 5
"""The head keeps ``content // HEAD_DIVISOR`` characters (about 20%), the tail the rest."""


def omission_marker(omitted: int) -> str:
    """The line between head and tail, naming how many characters were left out."""
    return f"\n[... {omitted} characters omitted ...]\n"


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What is known of a slot's source text: a prefix, a suffix and the whole length.

    A complete text is ``Excerpt(text, text, len(text))``. A fit returns the excerpt it
    kept, so a later, smaller fit can be cut from it without nesting a second header and
    with the same result a fit of the complete text would give.

    Attributes:
        head: a prefix of the source.
        tail: a suffix of the source.
        length: the source's length in code points.
    """

    head: str
    tail: str
    length: int

    @classmethod
    def of(cls, text: str) -> Excerpt:
        """The excerpt of a complete text (no copy: both ends are the text itself)."""
        return cls(text, text, len(text))


def fit_excerpt(source: Excerpt, limit: int, *, paths: Sequence[str] = ()) -> tuple[str, Excerpt]:
    """A preview of ``source`` of at most ``limit`` code points, and the excerpt it keeps.

    The preview is ``Tool output truncated.``, one ``Full output: <path>`` line per path
    that fits whole (in order), a blank line, a head of about 20% of the remaining room, an
    omission marker line and a tail of about 80%. Small limits degrade to a head-only
    preview, then the bare header, then a cut header, then ``""``. A preview is the limit
    long, or a code point or two shorter (a cut moved off a surrogate pair, or an omitted
    count with fewer digits than the source length it was sized for). Ends taken from an
    excerpt never reach past what it holds, so a preview cut from one may be shorter still.

    ``source`` must not fit ``limit`` (use :func:`fit_text` for text that might).
    """
    length = source.length
    if limit <= 0:
        return "", Excerpt("", "", length)
    header = TRUNCATION_HEADER
    if len(header) >= limit:
        return header[:limit], Excerpt("", "", length)
    for path in paths:
        line = ARTIFACT_LINE_PREFIX + path
        if len(header) + len(line) <= limit:
            header += line
    room = limit - len(header) - len(PREVIEW_SEPARATOR)
    if room <= 0:
        return header, Excerpt("", "", length)
    marker_room = len(omission_marker(length))
    head_size, tail = 0, ""
    if room > marker_room:
        content = room - marker_room
        head_size = content // HEAD_DIVISOR
        tail = safe_suffix(source.tail, content - head_size)
    if not tail:
        # No room for a marker and a tail (or an excerpt without one): the head alone.
        head = safe_prefix(source.head, room)
        kept = Excerpt(head, "", length)
        return (header + PREVIEW_SEPARATOR + head if head else header), kept
    head = safe_prefix(source.head, head_size)
    omitted = length - len(head) - len(tail)
    preview = header + PREVIEW_SEPARATOR + head + omission_marker(omitted) + tail
    return preview, Excerpt(head, tail, length)


def fit_text(text: str, limit: int, *, paths: Sequence[str] = ()) -> str:
    """``text`` itself when it fits ``limit``, else its preview (see :func:`fit_excerpt`)."""
    if len(text) <= limit:
        return text
    return fit_excerpt(Excerpt.of(text), limit, paths=paths)[0]
