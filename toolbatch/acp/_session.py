"""One ACP session: its state, the queue of updates it sends, and its model as the agent
loop sees it (words shown as they arrive, cancellable, traced on request)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import anyio
import anyio.to_thread
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from toolbatch._core import ToolDeclaration, parts_adapter
from toolbatch.acp._updates import CallIds, MessageSeparator, SessionUpdate
from toolbatch.agent import AgentLoop, Message, Model, ModelReply
from toolbatch.errors import ToolbatchError
from toolbatch.permissions import PermissionRule

log = structlog.get_logger("toolbatch.acp")


class _PromptCancelled(ToolbatchError):
    """The user cancelled the prompt while the model was answering."""


@dataclass(eq=False, slots=True)
class _Start:
    """A call's ``in_progress`` update, withdrawn if the call turns out not to have run: a
    call answered in place (refused, unknown, invalid) is started and finished in one step,
    so its start is withdrawn before the pump reaches it and the editor sees ``pending``
    then ``failed``, never ``in_progress``."""

    update: SessionUpdate
    withdrawn: bool = False
    sent: bool = False


_Outgoing: TypeAlias = SessionUpdate | _Start | anyio.Event
"""An update to send, a start that may be withdrawn, or a marker set once everything queued
before it was sent."""


@dataclass(eq=False, slots=True)
class _Session:
    """One ACP session: its agent loop and the state of the prompt running in it."""

    id: str
    cwd: Path
    ids: CallIds = field(default_factory=CallIds)
    closed: anyio.Event = field(default_factory=anyio.Event)
    loop: AgentLoop | None = None
    abort: anyio.Event | None = None
    model_scope: anyio.CancelScope | None = None
    updates: MemoryObjectSendStream[_Outgoing] | None = None
    always_allowed: set[str] = field(default_factory=set)
    """Tools the user allowed for the session ("always allow"), except the shell."""
    allowed_commands: list[PermissionRule] = field(default_factory=list)
    """Shell command prefixes the user allowed for the session (``Bash(git status *)``)."""
    permission_lock: anyio.Lock = field(default_factory=anyio.Lock)
    messages: MessageSeparator = field(default_factory=MessageSeparator)
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The MCP servers the editor asked this session to use (``mcpServers`` entries)."""
    last_used: float = field(default_factory=time.monotonic)

    def emit(self, update: SessionUpdate | _Start) -> None:
        """Queue ``update`` for the client, after everything queued before it."""
        if self.updates is None:
            log.debug("acp.update_without_prompt", session=self.id)
            return
        self.updates.send_nowait(update)

    async def flush(self) -> None:
        """Wait until every update queued so far has been sent."""
        if self.updates is None:
            return
        sent = anyio.Event()
        self.updates.send_nowait(sent)
        await sent.wait()

    def cancel(self) -> None:
        """Cancel the running prompt: its tools and any model request in flight."""
        if self.abort is not None:
            self.abort.set()
        if self.model_scope is not None:
            self.model_scope.cancel()


@dataclass(eq=False, slots=True)
class _SessionModel:
    """The session's model, as the agent loop sees it.

    Shows each reply's words to the user as soon as they arrive, stops waiting for the
    model when the prompt is cancelled, and traces what the model receives when asked.
    """

    inner: Model
    session: _Session
    trace: Path | None = None

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        if self.trace is not None and history:
            line = _trace_line(self.session.id, history[-1])
            await anyio.to_thread.run_sync(_append_line, self.trace, line)
        abort = self.session.abort
        reply: ModelReply | None = None
        with anyio.CancelScope() as scope:
            self.session.model_scope = scope
            try:
                if abort is None or not abort.is_set():
                    reply = await self.inner.respond(history, tools)
            finally:
                self.session.model_scope = None
        if reply is None:
            raise _PromptCancelled("the prompt was cancelled while the model was answering")
        if reply.text:
            self.session.emit(self.session.messages.chunk(reply.text))
        return reply


def _trace_line(session_id: str, message: Message) -> str:
    parts = parts_adapter.dump_python(
        list(message.parts), mode="json", by_alias=True, exclude_none=True
    )
    record = {"session_id": session_id, "role": message.role, "parts": parts}
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n"


def _append_line(path: Path, line: str) -> None:
    # Created 0600: the trace holds what the model receives, tool output (secrets) among it.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "a", encoding="ascii") as file:
        file.write(line)
