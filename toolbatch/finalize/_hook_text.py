"""Hook text: the turn's own text (hook context, a stop note), a slot of its own kind.

What hooks add to a turn belongs to the batch, not to a tool: it is never a
``ToolCallResponse``. It shares the batch's one budget with the responses (one max-min
water-fill over every slot), is cut like any slot (head and tail, one header naming the
file) and its full text is saved at most once, when it is first cut; the finalizer
returns it beside the responses (:class:`FinalizedTurn`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from toolbatch._core import TextPart, ToolCallResponse
from toolbatch.finalize._fit import Excerpt

__all__ = ["HOOK_TEXT_ARTIFACT", "FinalizedTurn", "HookText"]

HOOK_TEXT_ARTIFACT: Final = "hook-text"
"""What a cut hook text's file is named for (``hook-text-<n>-<digest>.txt``), where a
response's file is named for its tool."""


@dataclass(frozen=True, slots=True)
class HookText:
    """Text a hook gave the turn, as the model receives it (a top-level text part).

    Attributes:
        text: the text, or its preview once a pass cut it.
        persisted_output_files: ``None`` while undecided; once a pass cut it, the file
            holding the full text, or ``()`` when it could not be saved. A decided text is
            never written again.
        excerpt: what the preview kept of the full text (head, tail, length), so a smaller
            budget cuts again from it instead of nesting a header; ``None`` until cut.
    """

    text: str
    persisted_output_files: tuple[Path, ...] | None = None
    excerpt: Excerpt | None = field(default=None, repr=False)

    def part(self) -> TextPart:
        """The part the model receives."""
        return TextPart(text=self.text)


@dataclass(frozen=True, slots=True)
class FinalizedTurn:
    """What a finalizer pass returns: the responses, then the turn's own text, each bounded.

    Attributes:
        responses: the responses, in the order given.
        hook_text: the hook texts, in the order given.
        length: the budgeted length of both together when the pass measured them whole and
            left them as they were (they fit), else ``None``: a send guard under the same
            budget has nothing to check then.
    """

    responses: list[ToolCallResponse]
    hook_text: list[HookText]
    length: int | None = None
