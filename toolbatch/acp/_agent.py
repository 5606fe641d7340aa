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

Here are the agent and its sessions' hosts; how ``toolbatch acp`` runs (its options, the
shared model client, signals) is in ``_serve``, one session's state and model in
``_session``, a tool turn's updates in ``_turn``, the permission questions in
``_permissions``.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
import structlog
from acp import PROTOCOL_VERSION, Client, RequestError
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    StopReason,
)
from anyio.streams.memory import MemoryObjectReceiveStream

import toolbatch
from toolbatch.acp._choices import DEFAULT_MAX_SESSIONS
from toolbatch.acp._session import _Outgoing, _PromptCancelled, _Session, _SessionModel, _Start
from toolbatch.acp._turn import _AcpRuntime
from toolbatch.acp._updates import PromptBlock, prompt_text, replay_updates
from toolbatch.agent import (
    AgentLoop,
    Message,
    Model,
    ScriptedModel,
    history_from_transcript,
)
from toolbatch.errors import ConfigError, ToolbatchError
from toolbatch.recorder import JsonlRecorder, RecordedTurn, load_session
from toolbatch.scheduler import (
    Registry,
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)

__all__ = ["AcpAgent"]

log = structlog.get_logger("toolbatch.acp")

INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
"""JSON-RPC error codes (ACP's ``RequestError`` helpers would replace our messages)."""
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""Session ids name transcript files, so nothing that could leave the directory."""
_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "end_turn",
    "max_turns": "max_turn_requests",
    "cancelled": "cancelled",
    "hook_stop": "end_turn",
}


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
        # The same answer to every initialize, built once: building its five models
        # (pydantic copies their defaults) cost more than the rest of the request.
        self._initialized = InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=transcript_dir is not None,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                # session/new's HTTP and SSE servers are started too (spec: the client sends
                # only the transports the agent advertises; stdio is always supported).
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(
                name="toolbatch", title="toolbatch", version=toolbatch.__version__
            ),
        )

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
        return self._initialized

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
