"""What ``run``, ``serve`` and ``acp`` share: the scheduler configuration the flags describe,
the terminal status line, the closed standard descriptors; and the ``serve`` and ``acp``
commands."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

import anyio
import structlog

import toolbatch
from toolbatch._core import (
    BatchObserver,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
)
from toolbatch.cli._config_sources import read_config_sources
from toolbatch.scheduler import (
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)
from toolbatch.service import (
    serve_stdio,
)

if TYPE_CHECKING:
    from toolbatch.acp import AcpOptions

from toolbatch.cli._options import (
    EXIT_OK,
    STATUS_LINE_MIN_INTERVAL_S,
    _UsageError,
    sandbox_values,
)

log = structlog.get_logger("toolbatch.cli")


def _fail(message: str) -> None:
    try:
        sys.stderr.write(message.rstrip("\n") + "\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # no stderr to tell: the exit code does
        pass


_CLOSED_AT_START: Final[set[int]] = set()
"""Which of descriptors 0, 1 and 2 were closed when ``main`` started (now /dev/null)."""


def _reopen_closed_standard_fds() -> set[int]:
    """Put ``/dev/null`` on whichever of 0, 1 and 2 is closed; return which were.

    A closed stdout must not let the next file opened (a transcript, an artifact) become
    descriptor 1, where a child process or a stray print would write into it.
    """
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    for fd in sorted(closed):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
    return closed


# -- the runtime behind run and serve ----------------------------------------------------


class _Fanout:
    """Sends each observer event to several observers."""

    def __init__(self, *observers: BatchObserver) -> None:
        self._observers = observers

    def call_started(self, call: ToolCall) -> None:
        for observer in self._observers:
            observer.call_started(call)

    def call_progress(self, call: ToolCall, message: str) -> None:
        for observer in self._observers:
            observer.call_progress(call, message)

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        for observer in self._observers:
            observer.call_finished(call, response)


class _TerminalStatus:
    """A one-line status of the running calls on a terminal, cleared when none is left."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._running: dict[int, tuple[ToolCall, float, str]] = {}
        self._done = 0
        self._drawn = 0.0
        self._visible = False

    def call_started(self, call: ToolCall) -> None:
        self._running[id(call)] = (call, time.monotonic(), "")
        self._draw(force=True)

    def call_progress(self, call: ToolCall, message: str) -> None:
        entry = self._running.get(id(call))
        if entry is not None:
            self._running[id(call)] = (entry[0], entry[1], message)
            self._draw()

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        del response
        if self._running.pop(id(call), None) is not None:
            self._done += 1
        self._draw(force=True)

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._drawn < STATUS_LINE_MIN_INTERVAL_S:
            return
        self._drawn = now
        if not self._running:
            if self._visible:
                self._write("\r\x1b[K")
                self._visible = False
            return
        call, started, message = min(self._running.values(), key=lambda entry: entry[1])
        text = (
            f"toolbatch: {self._done} done, {len(self._running)} running; "
            f"{call.name} [{call.id}] {now - started:.0f}s"
        )
        if message:
            text += f": {message}"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self._write("\r\x1b[K" + text[:width])
        self._visible = True

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed terminal never breaks the batch
            self._running.clear()


class _SchedulerBackend:
    """Runs the service's batches through a ``ToolScheduler``, each at its own budget."""

    def __init__(
        self,
        scheduler: ToolScheduler,
        *,
        default_budget: int | None,
        status: _TerminalStatus | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._default_budget = default_budget
        self._status = status

    @property
    def default_budget(self) -> int | None:
        return self._default_budget

    async def wait_for_tools(self) -> Sequence[ToolDeclaration]:
        return await self._scheduler.wait_for_tools()

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        /,
        *,
        budget: int | None,
        abort: anyio.Event,
        observer: BatchObserver,
    ) -> Turn:
        watched = observer if self._status is None else _Fanout(observer, self._status)
        return await self._scheduler.run_batch(calls, abort=abort, observer=watched, budget=budget)


def _scheduler_config(args: argparse.Namespace) -> SchedulerConfig:
    """The configuration the runtime flags describe (``--budget`` is the session's budget)."""
    # Every settings and MCP source is read once, here; a bad one is a ConfigError: a usage
    # error.
    sources = read_config_sources(args)
    sandbox = sandbox_values(args)
    # The files the command writes for the user are kept from the commands too.
    sandbox["protected_paths"] = (*sandbox.get("protected_paths", ()), *_outputs(args))
    return SchedulerConfig(
        batch_budget=args.budget,
        concurrency=args.concurrency,
        call_timeout=args.timeout,
        artifacts_dir=args.artifacts_dir,
        mcp_servers=sources.mcp,
        mcp_startup_timeout=args.mcp_startup_timeout,
        settings=sources.settings,
        permission_mode=args.permission_mode,
        **sandbox,
    )


def _outputs(args: argparse.Namespace) -> list[str]:
    """The files the command writes for the user (the recording, the dual output)."""
    return [
        path
        for path in (getattr(args, "record", None), getattr(args, "dual_output", None))
        if isinstance(path, str) and path != "-"
    ]


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):
        return False


def _status_for(stream: TextIO) -> _TerminalStatus | None:
    return _TerminalStatus(stream) if _is_terminal(stream) else None


# -- serve -------------------------------------------------------------------------------

SERVER_GC_THRESHOLD: Final = (10_000, 10, 10)
"""The cyclic collector's thresholds while ``serve`` or ``acp`` runs (Python's are
``(700, 10, 10)``): thousands of batches in flight made each young collection walk them, and
the heap's growth set off full collections; together a third of the service's CPU. Cyclic
garbage is rare on the hot path (it is freed by reference counting), so a collection every
10,000 allocations keeps memory where it was."""


@contextlib.contextmanager
def _server_gc() -> Iterator[None]:
    """A long-running server's collector: what was loaded to start it (modules, schemas,
    the configuration) is frozen out of every collection, and young collections are rarer.
    Both are put back when the server stops (``main`` may run in a caller's process; one that
    froze objects of its own keeps them frozen, with those the server froze)."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(*SERVER_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if not frozen:
            gc.unfreeze()


def _command_serve(args: argparse.Namespace) -> int:
    config = _scheduler_config(args)
    with _server_gc():
        anyio.run(_serve, config, config.budget)
    return EXIT_OK


async def _serve(config: SchedulerConfig, budget: int | None) -> None:
    async with ToolScheduler(default_registry(), config) as scheduler:
        backend = _SchedulerBackend(
            scheduler, default_budget=budget, status=_status_for(sys.stderr)
        )
        await serve_stdio(backend, server_version=toolbatch.__version__)


# -- acp ---------------------------------------------------------------------------------


def _acp_options(args: argparse.Namespace) -> AcpOptions:
    from toolbatch.acp import AcpOptions

    if args.auto_approve and args.permission_mode not in (None, "bypassPermissions"):
        raise _UsageError(
            f"--auto-approve is the permission mode bypassPermissions; it cannot go with "
            f"--permission-mode {args.permission_mode}: pass one of them"
        )
    config = _scheduler_config(args)
    return AcpOptions(
        config=config,
        auto_approve=args.auto_approve,
        artifacts_dir=None if args.artifacts_dir is None else Path(args.artifacts_dir),
        model=args.model,
        transcript_dir=args.transcript_dir,
        trace_model=args.trace_model,
        max_sessions=args.max_sessions,
    )


def _command_acp(args: argparse.Namespace) -> int:
    from toolbatch.acp import check_model_settings, serve_acp

    options = _acp_options(args)

    check_model_settings(options.model)  # a missing variable fails before the editor connects
    with _server_gc():
        anyio.run(serve_acp, options)
    return EXIT_OK
