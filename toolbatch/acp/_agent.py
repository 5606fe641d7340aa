"""The ACP adapter: ``toolbatch acp`` is an Agent Client Protocol agent over stdio.

An editor such as Zed starts ``toolbatch acp`` and speaks ACP on its stdin and stdout:
``initialize``, ``session/new``, ``session/prompt``, ``session/cancel`` and, with
``--transcript-dir``, ``session/load``. Each session owns a ``ToolScheduler`` (its shell
runs in the session's ``cwd``) and an ``AgentLoop`` whose model is the deterministic
``ScriptedModel`` (``--model scripted``, the default), ``OpenAIChatModel`` (``--model
openai``), ``OpenAIResponsesModel`` (``--model openai-responses``, both configured from
``OPENAI_*``) or ``AnthropicModel`` (``--model anthropic``, from ``ANTHROPIC_*``).

The model response and the display are kept apart. Tool turns run through
``InteractiveRuntime``, so each turn is collected whole, finalized once by the turn
assembler, recorded in the session transcript and then sent: those finalized parts are
what the model receives next. The editor instead sees live events: ``tool_call`` (pending)
when the model asks for a call, ``tool_call_update`` when it starts, progresses and ends
(its content and ``rawOutput`` are the response's display, before finalization), and the
model's words as ``agent_message_chunk``. Every ``session/update`` leaves through
``AcpStdioTransport``, which bounds it with ``project_acp_update``; ``session/load``
replays a transcript through the same path.

Tools whose declaration has ``needs_permission`` (``run_shell_command``), and with
permission rules in force whatever no allow rule covers, are allowed or rejected by the
user through ``session/request_permission`` (one question at a time per session).
``--auto-approve`` is the permission mode ``bypassPermissions``: nothing is asked but what
an ask rule or a PreToolUse hook asks, and that still goes to the editor. A rejection is an
error response the model sees.
``session/cancel`` cancels the running tools (their process groups are stopped) and any
model request in flight; the prompt ends with stop reason ``cancelled``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, TypeAlias, cast

import anyio
import anyio.abc
import anyio.to_thread
import structlog
from acp import PROTOCOL_VERSION, Agent, Client, RequestError, run_agent
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    StopReason,
)
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import toolbatch
from toolbatch._core import ToolCall, ToolCallResponse, ToolDeclaration, Turn, parts_adapter
from toolbatch.acp._choices import DEFAULT_MAX_SESSIONS, MODEL_CHOICES, ModelChoice
from toolbatch.acp._stdio import AcpStdioTransport
from toolbatch.acp._updates import (
    CallIds,
    MessageSeparator,
    OutputTail,
    PromptBlock,
    SessionUpdate,
    command_prefixes,
    finished_update,
    permission_tool_call,
    progress_update,
    prompt_text,
    replay_updates,
    running_update,
    start_update,
)
from toolbatch.agent import (
    AgentLoop,
    AnthropicModel,
    InteractiveRuntime,
    Message,
    Model,
    ModelReply,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ScriptedModel,
    history_from_transcript,
)
from toolbatch.errors import ConfigError, ToolbatchError
from toolbatch.permissions import SHELL_TOOL, PermissionRule, Permissions
from toolbatch.recorder import JsonlRecorder, RecordedTurn, load_session
from toolbatch.scheduler import (
    DEFAULT_CALL_TIMEOUT_CEILING_S,
    BatchObserver,
    Registry,
    SchedulerConfig,
    ToolScheduler,
    approval_reason,
    default_registry,
)

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "MODEL_CHOICES",
    "REJECT_ONCE",
    "AcpAgent",
    "AcpOptions",
    "ModelChoice",
    "check_model_settings",
    "serve_acp",
]

log = structlog.get_logger("toolbatch.acp")

_MODEL_CLIENTS: Final[
    dict[str, type[OpenAIChatModel] | type[OpenAIResponsesModel] | type[AnthropicModel]]
] = {
    "openai": OpenAIChatModel,
    "openai-responses": OpenAIResponsesModel,
    "anthropic": AnthropicModel,
}
"""The model clients behind ``--model``, each configured from its environment variables."""

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
"""JSON-RPC error codes (ACP's ``RequestError`` helpers would replace our messages)."""
SHUTDOWN_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""Session ids name transcript files, so nothing that could leave the directory."""
_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "max_turns": "max_turn_requests",
    "cancelled": "cancelled",
    "hook_stop": "end_turn",
}


class _PromptCancelled(ToolbatchError):
    """The user cancelled the prompt while the model was answering."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcpOptions:
    """How ``toolbatch acp`` runs (the command line builds it; see ``toolbatch.cli``).

    Attributes:
        config: the scheduler configuration every session starts from (budget,
            concurrency, timeouts, MCP servers...). Each session gets its own
            ``session_id``, artifacts directory and the MCP servers its editor passes.
        auto_approve: the permission mode ``bypassPermissions`` (when ``config`` sets no
            other): ask the editor only what ask rules and hooks ask.
        artifacts_dir: where complete tool output is kept, one subdirectory per session
            (default: each session's folder of the per-user state directory, named by
            its session id; see ``toolbatch artifacts``).
        model: ``scripted`` (deterministic, no network), ``openai`` or
            ``openai-responses`` (``OPENAI_*``), or ``anthropic`` (``ANTHROPIC_*``).
        transcript_dir: where session transcripts are written, ``<session id>.jsonl``;
            ``session/load`` is offered only when it is set.
        trace_model: a file to which every message the model receives is appended as a
            JSON line (``{"session_id", "role", "parts"}``), to see exactly what it saw.
        max_sessions: sessions held open at once. A ``session/new`` or ``session/load``
            past it releases the least recently used session with no prompt running (a
            later prompt to it is "unknown session"), or is refused with an error when
            every session is running a prompt.
    """

    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    auto_approve: bool = False
    artifacts_dir: Path | None = None
    model: ModelChoice = "scripted"
    transcript_dir: Path | None = None
    trace_model: Path | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS


# -- one session ------------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Start:
    """A call's ``in_progress`` update, withdrawn if the call turns out not to have run: a
    call answered in place (refused, unknown, invalid) is started and finished in one step,
    so its start is withdrawn before the pump reaches it and the editor sees ``pending``
    then ``failed``, never ``in_progress``."""

    update: SessionUpdate
    withdrawn: bool = False
    sent: bool = False


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


OUTPUT_UPDATE_INTERVAL_S: Final = 0.25
"""A running call's output lines are sent to the client at most this often."""


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
        """Ask the user whether ``call`` may run (one question at a time per session).

        The question names what asked (a permission rule or a hook: ``approval_reason``);
        "always allow" remembers the command's prefix for the shell (Claude Code's "don't
        ask again for `git status` commands"), the tool for any other tool.
        """
        tool_call_id = self._id(call)
        if tool_call_id is None:
            return False
        session = self.session
        reason = approval_reason()
        prefixes = command_prefixes(call) if declaration.name == SHELL_TOOL else []
        # Unanswered, the question would hold the call (and the prompt) past any deadline:
        # it gets the call's ceiling (--timeout), its wait for an earlier question included.
        limit = (
            session.loop.scheduler.config.call_timeout
            if session.loop is not None
            else DEFAULT_CALL_TIMEOUT_CEILING_S
        )
        with anyio.move_on_after(limit) as waited:
            async with session.permission_lock:
                if _remembered(session, call, declaration):
                    return True
                await session.flush()  # the client knows the call before it is asked about it
                always = (
                    f"Always allow {call.name} in this session"
                    if not prefixes
                    else "Always allow "
                    + ", ".join(f"`{prefix}`" for prefix in prefixes)
                    + " commands in this session"
                )
                options = [
                    PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
                    PermissionOption(option_id=ALLOW_ALWAYS, name=always, kind="allow_always"),
                    PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
                ]
                if declaration.name == SHELL_TOOL and not prefixes:
                    # Not a plain sequence of simple commands: nothing safe to remember.
                    del options[1]
                response = await self.client.request_permission(
                    session_id=session.id,
                    tool_call=permission_tool_call(tool_call_id, call, reason=reason),
                    options=options,
                )
                outcome = response.outcome
                option = outcome.option_id if isinstance(outcome, AllowedOutcome) else None
                allowed = option in (ALLOW_ONCE, ALLOW_ALWAYS)
                if option == ALLOW_ALWAYS:
                    if prefixes:
                        session.allowed_commands.extend(
                            PermissionRule.parse(
                                f"Bash({prefix} *)",
                                "allow",
                                source="'always allow' in this session",
                            )
                            for prefix in prefixes
                        )
                    elif declaration.name != SHELL_TOOL:
                        session.always_allowed.add(declaration.name)
        if waited.cancelled_caught:
            log.warning("acp.permission_unanswered", session=session.id, call_id=call.id)
            raise TimeoutError(
                f"the client did not answer the permission request within {limit:g} s "
                f"(the call timeout, --timeout), so {call.name!r} was not run"
            )
        log.info(
            "acp.permission", session=session.id, call_id=call.id, allowed=allowed, reason=reason
        )
        return allowed


def _remembered(session: _Session, call: ToolCall, declaration: ToolDeclaration) -> bool:
    """Whether the user already allowed this call for the session."""
    if declaration.name != SHELL_TOOL:
        return declaration.name in session.always_allowed
    if not session.allowed_commands:
        return False
    remembered = Permissions(allow=tuple(session.allowed_commands))
    return remembered.decide(call.name, call.args).behavior == "allow"


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


# -- the agent --------------------------------------------------------------------------


def _scripted_model() -> Model:
    return ScriptedModel()


def _shell_registry(cwd: Path) -> Registry:
    return default_registry(cwd=cwd)


class AcpAgent:
    """The ACP ``Agent``: sessions, prompts, cancellation and transcript replay.

    Sessions are hosted in ``hosts``, a task group the caller owns; each host keeps its
    session's scheduler open until ``close_sessions()`` (or the group's end).

    Args:
        hosts: the task group that hosts the sessions.
        config: the scheduler configuration every session starts from.
        make_model: makes the model of a new session.
        make_registry: makes the tool registry of a new session from its ``cwd``
            (default: the built-in shell tool, running in that directory).
        auto_approve: the permission mode ``bypassPermissions`` (when ``config`` sets no
            other): ask the editor only what ask rules and hooks ask.
        artifacts_dir: each session keeps complete output in ``<dir>/<session id>``.
        transcript_dir: where transcripts go; enables ``session/load``.
        trace_model: see ``AcpOptions.trace_model``.
        max_sessions: see ``AcpOptions.max_sessions``.
    """

    def __init__(
        self,
        *,
        hosts: anyio.abc.TaskGroup,
        config: SchedulerConfig,
        make_model: Callable[[], Model] = _scripted_model,
        make_registry: Callable[[Path], Registry] = _shell_registry,
        auto_approve: bool = False,
        artifacts_dir: Path | None = None,
        transcript_dir: Path | None = None,
        trace_model: Path | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if max_sessions < 1:
            raise ConfigError(f"max_sessions must be at least 1, got {max_sessions!r}")
        self._max_sessions = max_sessions
        self._hosts = hosts
        if auto_approve and config.permission_mode is None:
            # Ask rules (and hooks' asks) still reach the editor: only routine asks go.
            config = replace(config, permission_mode="bypassPermissions")
        self._config = config
        self._make_model = make_model
        self._make_registry = make_registry
        self._auto_approve = auto_approve
        self._artifacts_dir = artifacts_dir
        self._transcript_dir = transcript_dir
        self._trace_model = trace_model
        self._sessions: dict[str, _Session] = {}
        self._client: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RuntimeError("the ACP connection is not open yet")
        return self._client

    # -- ACP methods --------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        log.info("acp.initialize", client_protocol=protocol_version, client=_name_of(client_info))
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=self._transcript_dir is not None,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                # session/new's HTTP and SSE servers are started too (spec: the client sends
                # only the transports the agent advertises; stdio is always supported).
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(
                name="toolbatch", title="toolbatch", version=toolbatch.__version__
            ),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: Any = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session = _Session(
            id=uuid.uuid4().hex, cwd=_session_cwd(cwd), mcp_servers=_editor_servers(mcp_servers)
        )
        await self._open(session, history=[])
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        path = self._transcript_path(session_id)
        session = _Session(
            id=session_id, cwd=_session_cwd(cwd), mcp_servers=_editor_servers(mcp_servers)
        )
        entries, history = await anyio.to_thread.run_sync(_read_transcript, path)
        previous = self._sessions.get(session_id)
        if previous is not None:
            if previous.abort is not None:
                raise RequestError(
                    INVALID_REQUEST,
                    f"session {session_id!r} is running a prompt; send session/cancel first",
                )
            previous.closed.set()
        await self._open(session, history=history)
        for update in replay_updates(entries, session.ids):  # all of it before the answer
            await self.client.session_update(session_id=session_id, update=update)
        log.info("acp.session_loaded", session=session_id, entries=len(entries))
        return LoadSessionResponse()

    async def prompt(
        self, prompt: list[PromptBlock], session_id: str, **kwargs: Any
    ) -> PromptResponse:
        session = self._session(session_id)
        if session.abort is not None:
            raise RequestError(
                INVALID_REQUEST,
                f"session {session_id!r} is already running a prompt; wait for it to end or "
                f"send session/cancel",
            )
        loop = session.loop
        assert loop is not None
        abort = anyio.Event()
        session.abort = abort
        session.last_used = time.monotonic()
        session.messages.new_prompt()
        stop: StopReason = "end_turn"
        failure: ToolbatchError | None = None
        try:
            async with self._pumping(session):
                try:
                    outcome = await loop.prompt(prompt_text(prompt), abort=abort)
                    stop = _STOP_REASONS[outcome.stop_reason]
                    if outcome.hook_reason is not None:
                        session.emit(
                            session.messages.chunk(f"Stopped by a hook: {outcome.hook_reason}")
                        )
                except _PromptCancelled:
                    stop = "cancelled"
                except ToolbatchError as exc:
                    failure = exc
        finally:
            session.abort = None
            session.last_used = time.monotonic()
        if failure is not None:
            log.warning("acp.prompt_failed", session=session_id, error=str(failure))
            raise RequestError(
                INTERNAL_ERROR, f"the prompt failed: {type(failure).__name__}: {failure}"
            ) from failure
        if abort.is_set():
            stop = "cancelled"
        log.info("acp.prompt_done", session=session_id, stop_reason=stop)
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("acp.cancel_unknown_session", session=session_id)
            return
        log.info("acp.cancel", session=session_id, running=session.abort is not None)
        session.cancel()

    # -- sessions -----------------------------------------------------------------------

    def close_sessions(self) -> None:
        """Let every session host close its scheduler and end."""
        for session in self._sessions.values():
            session.cancel()
            session.closed.set()
        self._sessions.clear()

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None or session.loop is None:
            raise RequestError(
                INVALID_PARAMS,
                f"unknown session {session_id!r}; create one with session/new (or session/load)",
            )
        return session

    def _transcript_path(self, session_id: str) -> Path:
        if self._transcript_dir is None:
            raise RequestError(
                INVALID_REQUEST,
                "session/load needs transcripts: start toolbatch acp with --transcript-dir DIR",
            )
        if not _SESSION_ID.fullmatch(session_id):
            raise RequestError(
                INVALID_PARAMS,
                f"session id {session_id!r} is not one toolbatch made (letters, digits, - and _)",
            )
        path = self._transcript_dir / f"{session_id}.jsonl"
        if not path.is_file():
            raise RequestError(
                RESOURCE_NOT_FOUND,
                f"no transcript for session {session_id!r} in {str(self._transcript_dir)!r}",
                {"uri": path.as_uri()},
            )
        return path

    def _make_room(self, replacing: str | None = None) -> None:
        """Below ``max_sessions`` open, releasing the least recently used idle session."""
        others = [s for s in self._sessions.values() if s.id != replacing]
        if len(others) < self._max_sessions:
            return
        idle = [s for s in others if s.abort is None]
        if not idle:
            raise RequestError(
                INVALID_REQUEST,
                f"{len(others)} sessions are open and every one is running a prompt, the most "
                f"this agent holds (--max-sessions {self._max_sessions}); wait for a prompt to "
                f"end or cancel one, or start toolbatch acp with a higher --max-sessions",
            )
        oldest = min(idle, key=lambda s: s.last_used)
        del self._sessions[oldest.id]
        oldest.closed.set()
        log.info("acp.session_released", session=oldest.id, limit=self._max_sessions)

    async def _open(self, session: _Session, *, history: list[Message]) -> None:
        self._make_room(replacing=session.id)
        try:
            await self._hosts.start(self._host, session, history)
        except ToolbatchError as exc:
            raise RequestError(INTERNAL_ERROR, f"could not start the session: {exc}") from exc
        self._sessions[session.id] = session
        log.info("acp.session_opened", session=session.id, cwd=str(session.cwd))

    async def _host(
        self,
        session: _Session,
        history: list[Message],
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        artifacts = None if self._artifacts_dir is None else self._artifacts_dir / session.id
        config = replace(
            self._config,
            session_id=session.id,
            artifacts_dir=artifacts,
            mcp_servers=_session_servers(self._config.mcp_servers, session.mcp_servers),
            # Commands run in the session's project, so that is the sandbox's workspace
            # unless --workspace says otherwise.
            workspace_roots=(
                self._config.workspace_roots
                if self._config.workspace_roots is not None
                else [session.cwd]
            ),
        )
        recorder = None
        if self._transcript_dir is not None:
            recorder = JsonlRecorder(
                self._transcript_dir / f"{session.id}.jsonl", session_id=session.id
            )
            # In the config too, so hooks are told the transcript_path; the agent loop
            # records through the same object, once.
            config = replace(config, recorder=recorder)
        async with ToolScheduler(self._make_registry(session.cwd), config) as scheduler:
            session.loop = AgentLoop(
                _SessionModel(self._make_model(), session, self._trace_model),
                scheduler,
                runtime=_AcpRuntime(session, self.client),
                recorder=recorder,
                history=history,
            )
            task_status.started()
            await session.closed.wait()
        log.info("acp.session_closed", session=session.id)

    @contextlib.asynccontextmanager
    async def _pumping(self, session: _Session) -> AsyncIterator[None]:
        """Send the session's updates, in order, while the block runs and until all are out."""
        send, receive = anyio.create_memory_object_stream[_Outgoing](math.inf)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump, session.id, receive)
            with send:
                session.updates = send
                try:
                    yield
                finally:
                    session.updates = None

    async def _pump(self, session_id: str, receive: MemoryObjectReceiveStream[_Outgoing]) -> None:
        with receive:
            async for item in receive:
                if isinstance(item, anyio.Event):
                    item.set()
                elif isinstance(item, _Start):
                    if not item.withdrawn:
                        item.sent = True
                        await self.client.session_update(session_id=session_id, update=item.update)
                else:
                    await self.client.session_update(session_id=session_id, update=item)


def _name_of(info: Any) -> str | None:
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None


def _session_cwd(cwd: str) -> Path:
    path = Path(cwd)
    if not path.is_absolute() or not path.is_dir():
        raise RequestError(
            INVALID_PARAMS, f"cwd must be the absolute path of a directory, got {cwd!r}"
        )
    return path


def _editor_servers(mcp_servers: Any) -> dict[str, dict[str, Any]]:
    """The editor's MCP servers (``session/new``'s ``mcpServers``) as ``mcpServers`` entries.

    Stdio servers keep their command, arguments and environment; HTTP and SSE servers their
    URL and headers (SSE through the MCP SDK's legacy client).
    """
    entries: dict[str, dict[str, Any]] = {}
    for server in mcp_servers or ():
        data = server.model_dump() if hasattr(server, "model_dump") else dict(server)
        name = str(data.get("name") or f"server{len(entries) + 1}")
        if data.get("command"):
            entries[name] = {
                "command": data["command"],
                "args": list(data.get("args") or []),
                "env": {e["name"]: e["value"] for e in data.get("env") or []},
            }
        elif data.get("url") and data.get("type", "http") in ("http", "sse"):
            entries[name] = {
                "type": data.get("type", "http"),
                "url": data["url"],
                "headers": {h["name"]: h["value"] for h in data.get("headers") or []},
            }
        else:
            log.warning("acp.mcp_server_skipped", server=name, reason="only stdio, http, sse")
    return entries


def _session_servers(configured: Any, editor: dict[str, dict[str, Any]]) -> Any:
    """``--mcp-config``'s servers plus the editor's (an editor entry wins on a name clash)."""
    if not editor:
        return configured
    from toolbatch.producers.mcp import load_mcp_config, merge_mcp_configs

    own = load_mcp_config({"mcpServers": editor})
    # Whatever shape the file has (mcpServers or VS Code's servers), its entries merge whole.
    return own if configured is None else merge_mcp_configs(load_mcp_config(configured), own)


def _read_transcript(path: Path) -> tuple[list[RecordedTurn], list[Message]]:
    return load_session(path), history_from_transcript(path)


# -- running ----------------------------------------------------------------------------


async def serve_acp(
    options: AcpOptions,
    *,
    transport: AcpStdioTransport | None = None,
    make_registry: Callable[[Path], Registry] = _shell_registry,
) -> None:
    """Serve ACP until the client closes the connection (or a shutdown signal arrives).

    Args:
        options: how to run.
        transport: where ACP flows (default: this process's stdin and stdout).
        make_registry: the tools of a session, from its ``cwd``.

    Raises:
        ConfigError: an option is invalid (raised before anything is read).
    """
    config = options.config
    async with contextlib.AsyncExitStack() as stack:
        make_model: Callable[[], Model] = _scripted_model
        if options.model != "scripted":
            client = _MODEL_CLIENTS[options.model]()
            shared: Model = await stack.enter_async_context(client)

            def make_model() -> Model:
                return shared  # one HTTP client serves every session

        if transport is None:
            transport = AcpStdioTransport.open_stdio()
        for flag, directory in (
            ("--transcript-dir", options.transcript_dir),
            ("--artifacts-dir", options.artifacts_dir),
        ):
            if directory is not None:
                try:
                    directory.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ConfigError(
                        f"{flag} {str(directory)!r} cannot be created: "
                        f"{exc.strerror or exc}; pass a directory you can write to"
                    ) from None
        async with anyio.create_task_group() as hosts:
            agent = AcpAgent(
                hosts=hosts,
                config=config,
                make_model=make_model,
                make_registry=make_registry,
                auto_approve=options.auto_approve,
                artifacts_dir=options.artifacts_dir,
                transcript_dir=options.transcript_dir,
                trace_model=options.trace_model,
                max_sessions=options.max_sessions,
            )
            log.info("acp.serving", model=options.model, auto_approve=options.auto_approve)
            try:
                with anyio.open_signal_receiver(*SHUTDOWN_SIGNALS) as signals:
                    async with anyio.create_task_group() as watcher:
                        watcher.start_soon(_shut_down_on_signal, signals, transport, hosts)
                        # The SDK's Agent protocol lists every optional method; the ones
                        # this agent lacks are answered "method not found" by its router.
                        await run_agent(cast(Agent, agent), transport)
                        watcher.cancel_scope.cancel()
            finally:
                agent.close_sessions()
    log.info("acp.stopped")


async def _shut_down_on_signal(
    signals: AsyncIterator[signal.Signals],
    transport: AcpStdioTransport,
    hosts: anyio.abc.TaskGroup,
) -> None:
    """First signal: end the input, so prompts are cancelled and cleaned up; second: stop."""
    async for received in signals:
        if not transport.input_ended:
            log.info("acp.shutdown", signal=received.name)
            transport.end_input()
        else:
            log.warning("acp.shutdown_forced", signal=received.name)
            hosts.cancel_scope.cancel()


def check_model_settings(model: ModelChoice) -> None:
    """Fail on a model client's missing settings now, before an editor connects.

    Raises:
        ConfigError: a variable the client needs is not set (the message names it).
    """
    if model != "scripted":
        _MODEL_CLIENTS[model]()
