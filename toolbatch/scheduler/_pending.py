"""The turn in progress: what ``execute`` returns and ``complete_turn`` completes, once.

A ``PendingTurn`` carries everything the completion needs from the execution, so nothing
is looked up again by identity: the responses in the model's call order (with each one's
position in that order, its *ordinal*), which of them the runtime answered itself, the
telemetry span of the turn, and, for a session hosted elsewhere, the reference under which
the host holds its own responses.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from toolbatch._core import ToolCallResponse
from toolbatch.errors import TurnAlreadyCompleted

if TYPE_CHECKING:
    from toolbatch.telemetry import TurnTelemetry

__all__ = ["PendingTurn"]

_UNPLACED: Final = -1


class PendingTurn:
    """One turn executed and not completed yet: pass it to ``complete_turn`` exactly once.

    Iterating it, indexing it and ``len()`` see the responses in the model's call order.
    A runtime that answers some calls itself (a duplicate id, a call it skipped) adds those
    answers with :meth:`add`, at the call's position in the model's order, before it
    completes the turn.

    Attributes:
        telemetry: the turn's span, when telemetry records (ended by the completion, or as
            "not completed" when the turn is dropped without one).
        remote: the host's reference to the responses it holds (``toolbatch.ray``), or
            ``None`` for a turn executed in this process.
    """

    __slots__ = (
        "__weakref__",
        "_completed",
        "_executed",
        "_ordinals",
        "_responses",
        "_unfinished",
        "_untraced",
        "remote",
        "telemetry",
    )

    def __init__(
        self,
        responses: Iterable[ToolCallResponse] = (),
        /,
        *,
        ordinals: Sequence[int] | None = None,
        telemetry: TurnTelemetry | None = None,
        remote: Any = None,
    ) -> None:
        """A turn of ``responses`` that ``execute`` produced (in call order).

        Args:
            responses: the executed responses, in the model's call order.
            ordinals: each response's position in the model's order (default: 0, 1, ...).
            telemetry: the turn's span, if one was started.
            remote: the host's reference to these responses, for a hosted session.
        """
        self._responses: list[ToolCallResponse] = list(responses)
        if ordinals is None:
            self._ordinals = list(range(len(self._responses)))
        else:
            self._ordinals = list(ordinals)
            if len(self._ordinals) != len(self._responses):
                raise ValueError(
                    f"ordinals has {len(self._ordinals)} entries for "
                    f"{len(self._responses)} responses; give one per response"
                )
        self._executed: list[bool] = [True] * len(self._responses)
        self._completed = False
        self.telemetry = telemetry
        self.remote = remote
        self._untraced = False
        """Set by ``execute`` when it found nothing recording: the completion then asks no
        more (a turn is traced whole or not at all)."""
        self._unfinished: weakref.finalize[Any, Any] | None = None
        if telemetry is not None:
            # A turn dropped without a completion still ends its span ("not completed").
            self._unfinished = weakref.finalize(self, telemetry.end_not_completed)

    @classmethod
    def answered(cls, responses: Iterable[ToolCallResponse], /) -> PendingTurn:
        """A turn nothing executed: every response was answered by the runtime itself."""
        turn = cls(responses)
        turn._executed = [False] * len(turn._responses)
        return turn

    # -- the responses ----------------------------------------------------------------------

    @property
    def responses(self) -> list[ToolCallResponse]:
        """The responses in the model's call order (a copy)."""
        return list(self._responses)

    def __len__(self) -> int:
        return len(self._responses)

    def __iter__(self) -> Iterator[ToolCallResponse]:
        return iter(self._responses)

    def __getitem__(self, index: int) -> ToolCallResponse:
        return self._responses[index]

    def __repr__(self) -> str:
        state = "completed" if self._completed else "pending"
        return f"<PendingTurn {state}, {len(self._responses)} responses>"

    def entries(self) -> Iterator[tuple[ToolCallResponse, int | None, int]]:
        """Each response with its index among the executed ones (``None``: the runtime
        answered it) and its ordinal, in call order."""
        position = 0
        for response, executed, ordinal in zip(
            self._responses, self._executed, self._ordinals, strict=True
        ):
            if executed:
                yield response, position, ordinal
                position += 1
            else:
                yield response, None, ordinal

    def answered_by_runtime(self) -> list[ToolCallResponse]:
        """The responses the runtime added itself (they never ran here)."""
        return [
            r for r, executed in zip(self._responses, self._executed, strict=True) if not executed
        ]

    def add(self, response: ToolCallResponse, /, *, ordinal: int) -> None:
        """Add a response the runtime answered itself, at position ``ordinal`` of the model's
        call order (after any response already at that position).

        Raises:
            TurnAlreadyCompleted: the turn was completed already.
        """
        if self._completed:
            raise TurnAlreadyCompleted(
                "this turn was already completed; add responses before complete_turn"
            )
        index = bisect.bisect_right(self._ordinals, ordinal)
        self._responses.insert(index, response)
        self._ordinals.insert(index, ordinal)
        self._executed.insert(index, False)

    # -- completion -------------------------------------------------------------------------

    @property
    def completed(self) -> bool:
        """Whether ``complete_turn`` took this turn (it completes a turn once)."""
        return self._completed

    def claim(self) -> None:
        """Mark the turn completed: the one completion calls this first.

        Raises:
            TurnAlreadyCompleted: the turn was completed already.
        """
        if self._completed:
            raise TurnAlreadyCompleted(
                f"this turn ({len(self._responses)} responses) was already completed; a "
                f"turn is completed exactly once (execute again for a new turn)"
            )
        self._completed = True
        if self._unfinished is not None:
            self._unfinished.detach()
            self._unfinished = None
