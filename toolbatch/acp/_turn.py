"""One tool turn as the editor sees it: ``tool_call`` when the model asks for a call,
``tool_call_update`` as it starts, reports output and ends, and the permission questions
its calls raise (``toolbatch.acp._permissions``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import anyio
import structlog
from acp import Client

from toolbatch._core import ToolCall, ToolCallResponse, ToolDeclaration, Turn
from toolbatch.acp._permissions import ask_permission
from toolbatch.acp._session import _Session, _Start
from toolbatch.acp._updates import (
    OutputTail,
    finished_update,
    progress_update,
    running_update,
    start_update,
)
from toolbatch.agent import AgentLoop, InteractiveRuntime, ModelReply
from toolbatch.scheduler import BatchObserver

__all__ = [
    "OUTPUT_UPDATE_INTERVAL_S",
]

log = structlog.get_logger("toolbatch.acp")

OUTPUT_UPDATE_INTERVAL_S: Final = 0.25
"""A running call's output lines are sent to the client at most this often."""


_NOT_RUN: Final = frozenset(
    {
        "unknown_tool",
        "invalid_call",
        "invalid_args",
        "duplicate_call",
        "permission_denied",
        "approval_failed",
    }
)
"""Error types of calls that were answered without running (refused, unknown, invalid)."""


@dataclass(eq=False, slots=True)
class _TurnView:
    """One tool turn as the client sees it: live call events and permission questions.

    A ``BatchObserver`` of the scheduler. Calls are known by their ordinal in the model's
    reply, which is also the index of their ACP id.
    """

    session: _Session
    client: Client
    tool_call_ids: list[str]
    starts: dict[str, _Start] = field(default_factory=dict)
    tails: dict[str, OutputTail] = field(default_factory=dict)
    """Each running call's latest output lines, by ACP id, shown at most every
    ``OUTPUT_UPDATE_INTERVAL_S`` (``show_tails`` sends what changed meanwhile)."""

    def _id(self, call: ToolCall) -> str | None:
        ordinal = call.ordinal
        if ordinal is None or not 0 <= ordinal < len(self.tool_call_ids):
            log.warning("acp.call_without_ordinal", call_id=call.id, ordinal=ordinal)
            return None
        return self.tool_call_ids[ordinal]

    def call_started(self, call: ToolCall) -> None:
        tool_call_id = self._id(call)
        if tool_call_id is not None:
            start = self.starts[tool_call_id] = _Start(running_update(tool_call_id))
            self.session.emit(start)

    def call_progress(self, call: ToolCall, message: str) -> None:
        tool_call_id = self._id(call)
        if tool_call_id is not None:
            self._tail(tool_call_id).report(message)
            self._show(tool_call_id)

    def call_output(self, call: ToolCall, text: str) -> None:
        tool_call_id = self._id(call)
        if tool_call_id is not None:
            self._tail(tool_call_id).feed(text)
            self._show(tool_call_id)

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        tool_call_id = self._id(call)
        if tool_call_id is not None:
            self.tails.pop(tool_call_id, None)
            start = self.starts.pop(tool_call_id, None)
            if start is not None and not start.sent and response.error_type in _NOT_RUN:
                start.withdrawn = True  # it never ran: pending, then failed
            self.session.emit(finished_update(tool_call_id, response))

    def _tail(self, tool_call_id: str) -> OutputTail:
        tail = self.tails.get(tool_call_id)
        if tail is None:
            tail = self.tails[tool_call_id] = OutputTail()
        return tail

    def _show(self, tool_call_id: str, *, now: float | None = None) -> None:
        tail = self.tails.get(tool_call_id)
        if tail is None or not tail.changed:
            return
        now = anyio.current_time() if now is None else now
        if now - tail.shown_at < OUTPUT_UPDATE_INTERVAL_S:
            return  # show_tails sends it soon
        tail.changed, tail.shown_at = False, now
        self.session.emit(progress_update(tool_call_id, tail.text()))

    async def show_tails(self) -> None:
        """Send the output lines that came since each call's last update, every
        ``OUTPUT_UPDATE_INTERVAL_S``, until cancelled."""
        while True:
            await anyio.sleep(OUTPUT_UPDATE_INTERVAL_S)
            now = anyio.current_time()
            for tool_call_id in list(self.tails):
                self._show(tool_call_id, now=now)

    async def approve(self, call: ToolCall, declaration: ToolDeclaration) -> bool:
        """Ask the user whether ``call`` may run (``ask_permission``)."""
        tool_call_id = self._id(call)
        if tool_call_id is None:
            return False
        return await ask_permission(self.session, self.client, tool_call_id, call, declaration)


@dataclass(frozen=True, slots=True)
class _AcpRuntime:
    """``InteractiveRuntime``, with the turn's calls shown to and approved by the client."""

    session: _Session
    client: Client

    async def run_tool_turn(
        self,
        loop: AgentLoop,
        reply: ModelReply,
        *,
        abort: anyio.Event | None,
        observer: BatchObserver | None,
    ) -> tuple[Turn, bool]:
        del observer  # this runtime reports to the client itself
        ids = [self.session.ids.allocate(call.id) for call in reply.tool_calls]
        for tool_call_id, call in zip(ids, reply.tool_calls, strict=True):
            self.session.emit(start_update(tool_call_id, call))
        view = _TurnView(self.session, self.client, ids)
        inner = InteractiveRuntime(approve=view.approve)
        async with anyio.create_task_group() as tg:
            tg.start_soon(view.show_tails)
            outcome = await inner.run_tool_turn(loop, reply, abort=abort, observer=view)
            tg.cancel_scope.cancel()
        return outcome
