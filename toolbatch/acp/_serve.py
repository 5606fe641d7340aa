"""Running ``toolbatch acp``: its options, the model client its sessions share, the
directories it writes, and shutdown on signals.

``serve_acp(options)`` opens the model client once (every session's model requests go
through it), makes the transcript and artifacts directories, and runs an ``AcpAgent`` over
the stdio transport until the editor closes the connection. A first ``SIGTERM``, ``SIGINT``
or ``SIGHUP`` ends the input, so running prompts are cancelled and cleaned up; a second
stops at once.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, cast

import anyio
import anyio.abc
import structlog
from acp import Agent, run_agent

from toolbatch.acp._agent import AcpAgent, _scripted_model, _shell_registry
from toolbatch.acp._choices import DEFAULT_MAX_SESSIONS, ModelChoice
from toolbatch.acp._stdio import AcpStdioTransport
from toolbatch.agent import AnthropicModel, Model, OpenAIChatModel, OpenAIResponsesModel
from toolbatch.errors import ConfigError
from toolbatch.scheduler import Registry, SchedulerConfig

__all__ = ["AcpOptions", "check_model_settings", "serve_acp"]

log = structlog.get_logger("toolbatch.acp")

_MODEL_CLIENTS: Final[
    dict[str, type[OpenAIChatModel] | type[OpenAIResponsesModel] | type[AnthropicModel]]
] = {
    "openai": OpenAIChatModel,
    "openai-responses": OpenAIResponsesModel,
    "anthropic": AnthropicModel,
}
"""The model clients behind ``--model``, each configured from its environment variables."""

SHUTDOWN_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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
