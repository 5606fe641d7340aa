"""The ``toolbatch`` command line: ``run``, ``demo``, ``serve``, ``acp``, ``tools`` and
``artifacts``.

``toolbatch run [BATCH]``
    Runs one batch of tool calls and writes the finalized turn to stdout. ``BATCH`` is a
    file, or ``-`` (the default) for stdin, holding the ``batch/run`` params object
    ``{"calls": [{"id", "name", "args"}], "budget": int | null}`` or a bare list of calls.
    The tools are the built-in ``run_shell_command`` plus the tools of ``--mcp-config``.
    Output goes through the headless adapter (``--output-format``):

    * ``text`` (default): what the model receives, call by call, then the budget used.
    * ``json`` / ``stream-json``: the headless events (init, tool_use, tool_result, result;
      one array, or one per line). ``tool_result.content`` is the call's display value,
      bounded to 65,536 bytes of JSON; ``result.result`` is the finalized model-facing
      parts as a JSON string (``JSON.parse`` gives the list of wire parts, exactly what the
      model receives and what ``--record`` writes).
    * ``--dual-output PATH`` also writes the ``stream-json`` events to ``PATH`` (protocol
      version 2), whatever the main format; its ``result.result`` is the parts JSON too
      (the text rendering is only ever shown on stdout).

    Bad input (an unreadable file, invalid JSON, a wrong shape, a bad flag) prints a message
    naming the value and the fix on stderr and exits 2 with nothing on stdout. A batch that
    ran exits 0 even when calls failed (their failures are information for the model);
    SIGINT or SIGTERM cancels the running calls, still writes the turn (its ``result``
    event then says ``"subtype": "error_during_execution", "is_error": true`` and still
    carries the parts; text output ends with an ``Error:`` line), and exits 130.

``toolbatch serve``
    JSON-RPC 2.0 over stdio (see ``toolbatch.service``).

``toolbatch demo``
    A scripted agent loop over real tools that shows what the budget does.

``toolbatch acp``
    The Agent Client Protocol agent on stdin/stdout (see ``toolbatch.acp``), for editors.

``toolbatch tools``
    The tools a configuration offers (name, source, description); see
    ``toolbatch.cli._inspect``.

``toolbatch artifacts list | clean [--older-than DURATION | --all] | show WHAT``
    The artifact sessions of the per-user state directory (where complete output goes
    when no ``--artifacts-dir`` is given): each session's files, size, last use and whether
    it is live; ``clean`` removes those unused for ``DURATION`` (``30m``, ``12h``, ``7d``;
    default 7 days, the age after which a new session removes them anyway), or all with
    ``--all``. A live session is never removed. ``show`` prints a session's files, a
    call's complete output or a file (``toolbatch.cli._inspect``).

The runtime flags (``--budget``, ``--concurrency``, ``--timeout``, ``--mcp-config``,
``--settings``, ``--mcp-startup-timeout``, ``--artifacts-dir``) are defined once here for
``run``, ``serve`` and ``acp``. Claude Code's configuration flags (``--settings``,
``--setting-sources``, ``--mcp-config``, ``--strict-mcp-config``, ``--allowedTools``,
``--disallowedTools``) are in ``_config_sources``: settings give hooks, permission rules
and ``mcpServers``; headless (``run``, ``serve``), a call a rule asks about is denied with
the rule named. Budget
(``--budget``, and ``"budget"`` in a batch): code points of model-facing tool text per
batch; ``0`` disables it; omitted means 200,000 (the runtime default). The flag means the
same on every command: the session's budget (``SchedulerConfig.batch_budget``); a batch
that carries its own ``budget`` (``run``'s batch object, a ``serve`` request) is bounded by
that one instead. Logs go to stderr (``--log-level``, default ``warning``) so stdout stays
clean. ``-v``/``--verbose`` is ``--log-level info`` (what the session set up, e.g. the
sandbox's layers, and each call's start and end) and, for ``run``, also streams the
running commands' output lines to stderr. While a batch runs (``toolbatch.cli._progress``):
``stream-json`` writes ``tool_progress`` events as calls start, run and end; a terminal's
stderr shows a status line.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import io
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final, TextIO, get_args

import anyio
import structlog

import toolbatch
from toolbatch._core import (
    BatchObserver,
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    JsonTooDeep,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
    UserFile,
)
from toolbatch.acp import DEFAULT_MAX_SESSIONS, MODEL_CHOICES
from toolbatch.artifacts import (
    SESSION_MAX_AGE_S,
    list_sessions,
    remove_sessions,
    sessions_dir,
)
from toolbatch.cli._config_sources import add_config_options, read_config_sources
from toolbatch.cli._progress import RunProgress
from toolbatch.errors import ConfigError, RecorderError, ToolbatchError
from toolbatch.finalize import DEFAULT_BATCH_BUDGET_CHARS, budget_from_wire
from toolbatch.logs import configure_logging
from toolbatch.permissions import PERMISSION_MODES
from toolbatch.producers import SandboxMode, ShellEnvMode
from toolbatch.recorder import JsonlRecorder
from toolbatch.scheduler import (
    DEFAULT_CALL_TIMEOUT_CEILING_S,
    DEFAULT_CONCURRENCY,
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)
from toolbatch.service import (
    MAX_MESSAGE_BYTES,
    BatchRunParams,
    batch_result,
    loads_json,
    parse_batch,
    serve_stdio,
)
from toolbatch.telemetry import export_from_environment
from toolbatch.transports import (
    OutputAdapter,
    OutputFormat,
    dumps_json_line,
    make_output_adapter,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from toolbatch.acp import AcpOptions

__all__ = ["main"]

log = structlog.get_logger("toolbatch.cli")

EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141
"""128 + SIGPIPE, what a shell reports for a command whose reader went away."""
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
OUTPUT_FORMATS: Final[tuple[OutputFormat, ...]] = ("text", "json", "stream-json")
MAX_BATCH_BYTES: Final = MAX_MESSAGE_BYTES
"""The largest batch ``run`` reads (64 MiB, a ``serve`` request's limit); its nesting is
limited like every input's (``toolbatch._core._json_limits.MAX_JSON_DEPTH``, 128 levels)."""
STATUS_LINE_MIN_INTERVAL_S: Final = 0.1
"""The terminal status line is redrawn at most this often (progress can be chatty)."""


class _Verbose(argparse.Action):
    """``-v``/``--verbose``: ``--log-level info``, and ``run`` streams the output lines."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        namespace.verbose = True
        namespace.log_level = "info"


class _UsageError(ConfigError):
    """Bad command-line input: printed on stderr, exit code 2."""


# -- arguments ---------------------------------------------------------------------------


def _budget(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"budget must be a whole number of characters >= 0 (0 disables it), got {text!r}"
        )
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _env_assignment(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name or "\0" in text:
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, got {text!r}")
    return name, value


def _logging_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="least severe log level written to stderr (default: warning)",
    )
    options.add_argument(
        "-v",
        "--verbose",
        action=_Verbose,
        help="--log-level info (what the session set up, e.g. the sandbox's layers, and each "
        "call's start and end); for run, also stream the running commands' output lines to "
        "stderr as they come, each prefixed with its call's id",
    )
    return options


def _runtime_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    add_config_options(options)  # --mcp-config, --settings, ... (cli/_config_sources.py)
    options.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        metavar="MODE",
        help="overrides the settings' permissions.defaultMode, as Claude Code's: default (ask "
        "what no allow rule covers; headless: refuse it), acceptEdits (also run plain "
        "mkdir/touch/rm/rmdir/mv/cp inside the working directory), plan (as default), "
        "dontAsk (refuse whatever would ask), bypassPermissions (ask only ask rules); deny "
        "rules hold in every mode",
    )
    options.add_argument(
        "--mcp-startup-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="how long each MCP server has to start when its entry sets no "
        "startup_timeout_sec (default: MCP_TIMEOUT in milliseconds, else 30)",
    )
    options.add_argument(
        "--budget",
        type=_budget,
        metavar="CHARS",
        help=f"the session's aggregate budget of model-facing tool text per batch, in "
        f"characters; 0 disables it; a batch that carries its own budget uses that one "
        f"(default: {DEFAULT_BATCH_BUDGET_CHARS:,})",
    )
    options.add_argument(
        "--artifacts-dir",
        metavar="DIR",
        help="where complete output is kept (default: a folder per session in the per-user "
        "state directory; see toolbatch artifacts)",
    )
    options.add_argument(
        "--concurrency",
        type=_positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"calls of one batch that run at once (default {DEFAULT_CONCURRENCY})",
    )
    options.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_CALL_TIMEOUT_CEILING_S,
        metavar="SECONDS",
        help=f"ceiling on any one call (default {DEFAULT_CALL_TIMEOUT_CEILING_S:g}; shell "
        f"calls default to 120 s unless they ask for more)",
    )
    options.add_argument(
        "--sandbox",
        choices=get_args(SandboxMode),
        default="workspace-write",
        metavar="MODE",
        help="what shell commands may write: workspace-write (default: the workspace and "
        "the temp dir, protected paths excepted), read-only (a private temp dir only) or off",
    )
    options.add_argument(
        "--workspace",
        action="append",
        metavar="DIR",
        help="a directory workspace-write commands may write (repeatable; default: the "
        "current directory)",
    )
    options.add_argument(
        "--network",
        dest="network",
        action="store_true",
        default=False,
        help="let shell commands reach the network (default: off in the sandbox)",
    )
    options.add_argument(
        "--no-network",
        dest="network",
        action="store_false",
        help="keep shell commands off the network (the default)",
    )
    options.add_argument(
        "--protect",
        action="append",
        metavar="PATH",
        help="keep PATH read-only from shell commands (repeatable; beside .git, .claude, "
        ".mcp.json, .vscode, .codex, .toolbatch, the settings, hook and MCP scripts)",
    )
    options.add_argument(
        "--sandbox-private-tmp",
        action="store_true",
        help="give shell commands a private temp dir instead of the system's",
    )
    options.add_argument(
        "--sandbox-required",
        action="store_true",
        help="refuse shell commands when the sandbox cannot be enforced (default: warn "
        "once and run them unconfined)",
    )
    options.add_argument(
        "--shell-env",
        choices=get_args(ShellEnvMode),
        default="inherit",
        metavar="MODE",
        help="shell commands' environment: inherit (default: the agent's minus names "
        "holding KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL), minimal or none",
    )
    options.add_argument(
        "--shell-env-allow",
        action="append",
        metavar="NAME",
        help="a variable name or glob kept in the shell's environment anyway (repeatable)",
    )
    options.add_argument(
        "--shell-env-set",
        action="append",
        type=_env_assignment,
        metavar="NAME=VALUE",
        help="a variable set for every shell command (repeatable)",
    )
    return options


def _parser() -> argparse.ArgumentParser:
    logging_options = _logging_options()
    runtime_options = _runtime_options()
    parser = argparse.ArgumentParser(
        prog="toolbatch",
        description="A bounded, concurrent tool runtime for coding agents.",
        parents=[logging_options],
    )
    parser.add_argument("--version", action="version", version=toolbatch.__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run",
        parents=[logging_options, runtime_options],
        help="run one batch of tool calls and print the finalized turn",
        description="Run one batch of tool calls (a JSON file or stdin) and write the "
        "finalized turn: what the model receives, within the budget.",
    )
    run.add_argument(
        "batch",
        nargs="?",
        default="-",
        metavar="BATCH",
        help='a JSON file with {"calls": [...], "budget": ...} or a list of calls; '
        "- (default) reads stdin",
    )
    run.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        default="text",
        help="text (default): what the model receives, readable; json: one array of "
        "events; stream-json: one event per line",
    )
    run.add_argument(
        "--dual-output",
        metavar="PATH",
        help="also write the stream-json events to PATH (protocol version 2)",
    )
    run.add_argument(
        "--record",
        metavar="PATH",
        help="append the finalized turn to this JSONL transcript (toolbatch.load_session)",
    )
    sub.add_parser(
        "serve",
        parents=[logging_options, runtime_options],
        help="serve batches over JSON-RPC 2.0 on stdin/stdout",
        description="JSON-RPC 2.0 over stdio, one message per line: initialize, tools/list, "
        "batch/run (with batch/progress notifications), batch/cancel, shutdown.",
    )
    demo = sub.add_parser(
        "demo",
        parents=[logging_options],
        help="a scripted agent over real tools, showing what the budget does",
        description="Run a scripted agent loop (no network) over the shell, an MCP server "
        "and a Python tool, and print what each call produced, what the model received, "
        "what was persisted where and the budget used per turn.",
    )
    demo.add_argument(
        "--budget",
        type=_budget,
        default=None,
        metavar="CHARS",
        help="budget per turn (default: small enough that the finalizer must shorten)",
    )
    demo.add_argument(
        "--workdir",
        metavar="DIR",
        help="where the demo's commands run and its files go (default: a new temp dir)",
    )
    acp = sub.add_parser(
        "acp",
        parents=[logging_options, runtime_options],
        help="serve the Agent Client Protocol on stdin/stdout (for editors such as Zed)",
        description="Serve the Agent Client Protocol on stdin/stdout (for editors such as Zed).",
    )
    acp.add_argument(
        "--auto-approve",
        action="store_true",
        help="run tools that need permission (the shell) without asking the editor: the "
        "permission mode bypassPermissions (ask rules and hooks' asks still ask it)",
    )
    acp.add_argument(
        "--model",
        choices=MODEL_CHOICES,
        default="scripted",
        metavar="MODEL",
        help="scripted: each '$ ' line of a prompt is a shell call (default); "
        "openai: an OpenAI-compatible chat API from OPENAI_BASE_URL, OPENAI_API_KEY, "
        "OPENAI_MODEL; openai-responses: the OpenAI Responses API (same variables); "
        "anthropic: the Anthropic Messages API from ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, "
        "ANTHROPIC_MODEL",
    )
    acp.add_argument(
        "--transcript-dir",
        type=Path,
        metavar="DIR",
        help="record each session to DIR/<session id>.jsonl and offer session/load",
    )
    acp.add_argument(
        "--max-sessions",
        type=_positive_int,
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help=f"sessions held open at once (default {DEFAULT_MAX_SESSIONS}); a new one past N "
        "releases the least recently used idle session, or is refused when all are busy",
    )
    acp.add_argument(
        "--trace-model",
        type=Path,
        metavar="FILE",
        help="append every message the model receives to FILE as JSON lines",
    )
    tools = sub.add_parser(
        "tools",
        parents=[logging_options, runtime_options],
        help="list the tools a configuration offers: name, source, description",
        description="List every tool the model would be offered with these flags (the "
        "built-in shell and the MCP servers' tools, once each server started or failed): "
        "name, source (built-in or mcp:<server>) and description; then servers that did "
        "not start, with why.",
    )
    tools.add_argument("--json", action="store_true", help="one JSON object instead")
    artifacts = sub.add_parser(
        "artifacts",
        parents=[logging_options],
        help="list or free the artifact sessions kept in the per-user state directory",
        description="Complete tool output of runs without --artifacts-dir is kept per session "
        "in the per-user state directory, for 7 days after the session's last use.",
    )
    action = artifacts.add_subparsers(dest="action", metavar="ACTION", required=True)
    action.add_parser("list", help="each session: files, size, last use, live or not")
    show = action.add_parser(
        "show",
        help="a session's files, a call's complete output, or a file",
        description="A session id: its files. A call id: the complete output kept for it, "
        "on stdout as it is. A path: that file.",
    )
    show.add_argument("what", metavar="SESSION|CALL|PATH")
    clean = action.add_parser("clean", help="remove sessions that are not live")
    which = clean.add_mutually_exclusive_group()
    which.add_argument(
        "--older-than",
        type=_duration,
        default=SESSION_MAX_AGE_S,
        metavar="DURATION",
        help="remove sessions unused for this long: 90s, 30m, 12h, 7d or 2w (default 7d)",
    )
    which.add_argument("--all", action="store_true", help="remove every session not live")
    return parser


_DURATION_UNITS_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(text: str) -> float:
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    try:
        value = float(number) * _DURATION_UNITS_S[unit]
    except (KeyError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a number and a unit (s, m, h, d or w), such as 12h or 7d; got {text!r}"
        )
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolbatch`` command line and return its exit code."""
    _CLOSED_AT_START.update(_reopen_closed_standard_fds())
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exc:  # argparse: --help, --version or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    configure_logging(getattr(args, "log_level", "warning"))
    # OTLP export when the standard OTEL_* variables ask for it (toolbatch.telemetry).
    exporting = export_from_environment() if args.command != "artifacts" else None
    try:
        if args.command == "run":
            return _command_run(args)
        if args.command == "serve":
            return _command_serve(args)
        if args.command == "acp":
            return _command_acp(args)
        if args.command == "artifacts":
            return _command_artifacts(args, sys.stdout)
        if args.command == "tools":
            from toolbatch.cli._inspect import list_tools

            show_tools = functools.partial(
                list_tools, _scheduler_config(args), sys.stdout, as_json=args.json
            )
            anyio.run(show_tools)
            return EXIT_OK
        if args.command == "demo":
            from toolbatch.cli._demo import run_demo

            demo = functools.partial(
                run_demo, budget=args.budget, workdir=args.workdir, out=sys.stdout
            )
            return anyio.run(demo)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except ConfigError as exc:  # bad flags, batches and configuration files
        _fail(f"toolbatch {args.command}: {exc}")
        return EXIT_USAGE
    except ToolbatchError as exc:
        _fail(f"toolbatch {args.command}: {exc}")
        return EXIT_FAILURE
    finally:
        if exporting is not None:
            exporting.close()
    parser.print_help(sys.stderr)
    return EXIT_USAGE


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
    return SchedulerConfig(
        batch_budget=budget_from_wire(args.budget, DEFAULT_BATCH_BUDGET_CHARS),
        concurrency=args.concurrency,
        call_timeout=args.timeout,
        artifacts_dir=args.artifacts_dir,
        mcp_servers=sources.mcp,
        mcp_startup_timeout=args.mcp_startup_timeout,
        settings=sources.settings,
        permission_mode=args.permission_mode,
        sandbox=args.sandbox,
        workspace_roots=args.workspace,
        network=args.network,
        protected_paths=[*(args.protect or ()), *_outputs(args)],
        sandbox_private_tmp=args.sandbox_private_tmp,
        sandbox_required=args.sandbox_required,
        shell_env=args.shell_env,
        shell_env_allow=tuple(args.shell_env_allow or ()),
        shell_env_set=dict(args.shell_env_set or ()),
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


# -- run ---------------------------------------------------------------------------------


def _read_limited(stream: BinaryIO, where: str) -> bytes:
    """At most ``MAX_BATCH_BYTES`` of ``stream`` (``/dev/zero`` included), else a usage error."""
    data = stream.read(MAX_BATCH_BYTES + 1)
    if len(data) > MAX_BATCH_BYTES:
        raise _UsageError(
            f"the batch in {where} is larger than {MAX_BATCH_BYTES:,} bytes (the limit of one "
            f"batch, as for a toolbatch serve request); split it into several batches"
        )
    return data


def _read_batch(source: str) -> BatchRunParams:
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise _UsageError(
                "no batch given and stdin is a terminal; pass a batch file "
                "(toolbatch run batch.json) or pipe JSON in (... | toolbatch run -)"
            )
        where = "stdin"
        data = _read_limited(sys.stdin.buffer, where)
    else:
        where = repr(source)
        try:
            with open(source, "rb") as stream:
                data = _read_limited(stream, where)
        except OSError as exc:
            raise _UsageError(
                f"cannot read the batch file {source!r}: {exc.strerror or exc}; pass a "
                f"readable JSON file, or - to read stdin"
            ) from None
    if not data.strip():
        raise _UsageError(
            f"the batch in {where} is empty; give a JSON list of calls or "
            f'{{"calls": [...], "budget": ...}}'
        )
    try:
        document = loads_json(data)
    except JsonTooDeep as exc:
        raise _UsageError(f"the batch in {where} is refused: {exc}") from None
    except ValueError as exc:
        raise _UsageError(
            f"the batch in {where} is not valid JSON: {exc}; give a JSON list of calls or "
            f'{{"calls": [...], "budget": ...}}'
        ) from None
    try:
        return parse_batch(document)
    except ConfigError as exc:
        raise _UsageError(f"the batch in {where} has the wrong shape: {exc}") from None


class _RecordingRaw(io.RawIOBase):
    """A descriptor that never raises on write: the first error is kept, the bytes dropped."""

    def __init__(self, fd: int, *, close_fd: bool, file: UserFile | None = None) -> None:
        super().__init__()
        self._fd = fd
        self._close_fd = close_fd
        self._file = file
        """A file of the user's: checked to still be the one opened before each write."""
        self.failure: OSError | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: ReadableBuffer) -> int:
        size = len(memoryview(data))
        if self.failure is None:
            try:
                if self._file is not None:
                    self._file.check()
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:
                self.failure = exc
        return size

    def close(self) -> None:
        if not self.closed and self._file is not None:
            self._file.close()
        elif not self.closed and self._close_fd:
            try:
                os.close(self._fd)
            except OSError as exc:
                self.failure = self.failure or exc
        super().close()


class _Output:
    """Where ``run`` writes: a UTF-8 text stream that keeps going when its descriptor fails.

    A full disk, ``/dev/full`` or a reader that went away must not stop the other outputs
    (stdout, the Dual Output sidecar) from getting the results: each write error is kept
    (``failure``) and reported once the run is over, as one line naming the output and
    the fix.
    """

    def __init__(self, fd: int, name: str, *, close_fd: bool, file: UserFile | None = None) -> None:
        self.name = name
        self._raw = _RecordingRaw(fd, close_fd=close_fd, file=file)
        self.text = io.TextIOWrapper(
            io.BufferedWriter(self._raw),
            encoding="utf-8",
            errors="backslashreplace",
            newline="\n",
        )

    @property
    def failure(self) -> OSError | None:
        return self._raw.failure

    def close(self) -> None:
        try:
            self.text.close()
        except (OSError, ValueError) as exc:  # closing flushes; the raw layer never raises
            log.debug("cli.output_close_failed", output=self.name, error=str(exc))


def _open_dual_output(path: str | None) -> _Output | None:
    if path is None:
        return None
    try:
        # 0600, opened once and never through a symlink (the temp dir is shared): the
        # sidecar holds tool output, which may hold secrets.
        file = UserFile.open(path, append=False, truncate=True)
    except OSError as exc:
        raise _UsageError(
            f"cannot write the dual output file {path!r}: {exc.strerror or exc}; pass a "
            f"path in a writable directory"
        ) from None
    return _Output(file.fd, f"the dual output file {path!r}", close_fd=True, file=file)


def _stdout_output() -> _Output | None:
    """stdout as an ``_Output`` when it is this process's descriptor 1 (not a test's)."""
    if 1 in _CLOSED_AT_START:  # /dev/null now: written to, reported as closed
        return _Output(1, "stdout", close_fd=False)
    try:
        if sys.stdout is not None and sys.stdout.fileno() == 1:
            sys.stdout.flush()
            return _Output(1, "stdout", close_fd=False)
    except (AttributeError, OSError, ValueError):
        pass
    return None


def _output_failure_line(output: _Output, exc: OSError) -> str:
    if output.name == "stdout":
        fix = "free space where stdout goes, or redirect it to a writable file"
        if isinstance(exc, BrokenPipeError):
            fix = "keep the reader of stdout open until the run ends"
    else:
        fix = "free space there, or pass another --dual-output path"
    return f"toolbatch run: cannot write the results to {output.name}: {exc.strerror or exc}; {fix}"


def _command_run(args: argparse.Namespace) -> int:
    batch = _read_batch(args.batch)
    config = _scheduler_config(args)
    budget = batch.resolve_budget(config.budget)
    stdout_closed = 1 in _CLOSED_AT_START
    if stdout_closed and args.dual_output is None and args.record is None:
        raise _UsageError(
            "stdout is closed and neither --dual-output nor --record is given, so the "
            "results would go nowhere; run it with stdout open, or pass --dual-output PATH"
        )
    sidecar = _open_dual_output(args.dual_output)
    main_output = _stdout_output()
    stdout = main_output.text if main_output is not None else sys.stdout
    if main_output is None and hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8", errors="backslashreplace")
    failures: list[str] = []
    try:
        code = anyio.run(
            _run_batch,
            args,
            batch,
            config,
            budget,
            stdout,
            None if sidecar is None else sidecar.text,
            failures,
        )
    finally:
        for output in (main_output, sidecar):
            if output is not None:
                output.close()
    broken_pipe = False
    for output in (main_output, sidecar):
        if output is not None and output.failure is not None:
            broken_pipe = broken_pipe or (
                output is main_output and isinstance(output.failure, BrokenPipeError)
            )
            if not broken_pipe:
                failures.append(_output_failure_line(output, output.failure))
    if stdout_closed:
        failures.append(
            "toolbatch run: stdout is closed, so the results were not printed (they are in "
            "--dual-output or --record); run it with stdout open to see them"
        )
    for line in failures:
        _fail(line)
    if code == EXIT_INTERRUPTED:
        return code
    if broken_pipe and not failures:
        return EXIT_BROKEN_PIPE  # the reader went away (| head): quiet, as cat is
    return EXIT_FAILURE if failures or broken_pipe else code


async def _run_batch(
    args: argparse.Namespace,
    batch: BatchRunParams,
    config: SchedulerConfig,
    budget: int | None,
    stdout: TextIO,
    sidecar: TextIO | None,
    failures: list[str],
) -> int:
    calls = batch.tool_calls()
    if args.record is not None:
        config = dataclasses.replace(config, recorder=JsonlRecorder(args.record))
    abort = anyio.Event()
    interrupted: list[int] = []
    started = time.perf_counter()
    async with ToolScheduler(default_registry(), config) as scheduler:
        # Nothing is written before the session opened (a bad config writes nothing).
        with make_output_adapter(args.output_format, stdout, dual_output=sidecar) as adapter:
            # Init and the calls at once (MCP servers still starting are "pending").
            servers = scheduler.mcp_servers
            adapter.init(
                f"run-{uuid.uuid4()}",
                [declaration.name for declaration in scheduler.declarations()],
                mcp_servers=None if servers is None else servers.statuses(),
            )
            for call in calls:
                adapter.tool_use(call)
            turn = await _run_watched(
                args, scheduler, calls, budget, abort, interrupted, adapter, failures
            )
            # The model-facing results: the finalized turn, once it is complete.
            for call, response in zip(calls, turn.responses, strict=True):
                adapter.tool_result(call, response)
            stopped_by = ", ".join(
                dict.fromkeys(signal.Signals(signum).name for signum in interrupted)
            )
            adapter.result(
                num_turns=1,
                is_error=bool(interrupted),
                error=f"interrupted by {stopped_by}: the unfinished calls were cancelled"
                if interrupted
                else None,
                # Programs (json, stream-json, the sidecar) get the parts; people the text.
                result=dumps_json_line(batch_result(turn)["parts"]),
                text=render_turn_text(turn, budget=budget)
                if args.output_format == "text"
                else None,
                duration_ms=(time.perf_counter() - started) * 1000,
                budget_chars=budget,
                budget_used_chars=turn.content_length,
                stop_reason=turn.stop_reason,
            )
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


async def _run_watched(
    args: argparse.Namespace,
    scheduler: ToolScheduler,
    calls: Sequence[ToolCall],
    budget: int | None,
    abort: anyio.Event,
    interrupted: list[int],
    adapter: OutputAdapter,
    failures: list[str],
) -> Turn:
    """Run the batch with live progress (``toolbatch.cli._progress``); SIGINT and SIGTERM
    abort it."""

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.warning("cli.interrupted", signal=signal.Signals(signum).name)
                interrupted.append(signum)
                abort.set()

    progress = RunProgress(
        events=adapter if args.output_format == "stream-json" else None,
        status=sys.stderr if _is_terminal(sys.stderr) else None,
        verbose=sys.stderr if getattr(args, "verbose", False) else None,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_signals)
        tg.start_soon(progress.tick)
        try:
            turn = await scheduler.run_batch(calls, budget=budget, abort=abort, observer=progress)
        except RecorderError as exc:
            if not isinstance(exc.turn, Turn):
                raise
            # The calls ran: their results are still shown, the failure reported after.
            turn = exc.turn
            failures.append(f"toolbatch run: --record failed: {exc}")
        finally:
            progress.close()
        tg.cancel_scope.cancel()
    return turn


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def render_turn_text(turn: Turn, *, budget: int | None) -> str:
    """A readable rendering of what the model receives, call by call, and the budget used."""
    lines: list[str] = []
    total = len(turn.responses)
    for index, response in enumerate(turn.responses, 1):
        lines.append(
            f"== [{index}/{total}] {response.name} ({response.call_id}): {response.status}, "
            f"{_plural(response.content_length, 'char')}"
        )
        for part in response.parts:
            lines.extend(_render_part(part))
        lines.append("")
    for part in turn.context_parts:
        lines.append("== batch context (not from a tool)")
        lines.extend(_render_part(part))
        lines.append("")
    if turn.stop_reason is not None:
        lines.append(f"== stopped by a hook: {turn.stop_reason}")
        lines.append("")
    used = turn.content_length
    limit = "no budget" if budget is None else f"of {budget:,}"
    lines.append(
        f"{_plural(total, 'call')}: {used:,} {limit} characters of tool output sent to the model"
    )
    return "\n".join(lines) + "\n"


def _render_part(part: object) -> list[str]:
    if isinstance(part, FunctionResponsePart):
        rendered = []
        for key, value in part.function_response.response.items():
            if key == "output" and isinstance(value, str):
                rendered.append(value.rstrip("\n"))
            elif isinstance(value, str):
                rendered.append(f"{key}: {value.rstrip()}")
            else:
                rendered.append(f"{key}: {dumps_json_line(value)}")
        return rendered
    if isinstance(part, TextPart):
        return [part.text.rstrip("\n")]
    if isinstance(part, InlineDataPart):
        data = part.inline_data
        return [f"[inline {data.mime_type}: {len(data.data):,} base64 characters]"]
    if isinstance(part, FileDataPart):
        return [f"[file {part.file_data.mime_type}: {part.file_data.file_uri}]"]
    return [f"[part: {part!r}]"]


# -- serve -------------------------------------------------------------------------------


def _command_serve(args: argparse.Namespace) -> int:
    config = _scheduler_config(args)
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
    anyio.run(serve_acp, options)
    return EXIT_OK


# -- artifacts ---------------------------------------------------------------------------


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return "just now"


def _command_artifacts(args: argparse.Namespace, out: TextIO) -> int:
    if args.action == "show":
        from toolbatch.cli._inspect import show_artifact, stdout_bytes

        show_artifact(args.what, out, stdout_bytes() if out is sys.stdout else None)
        return EXIT_OK
    where = sessions_dir(create=False)
    if args.action == "list":
        sessions = list_sessions()
        now = time.time()
        out.write(
            f"{where}: {_plural(len(sessions), 'session')}, "
            f"{_human_bytes(sum(s.size_bytes for s in sessions))} (a session is removed "
            f"{SESSION_MAX_AGE_S / 86400:g} days after its last use)\n"
        )
        for session in sessions:
            line = (
                f"  {session.id:<32} {_plural(session.files, 'file'):>11} "
                f"{_human_bytes(session.size_bytes):>11}  {_human_age(now - session.last_used):<9}"
                f"{'  live' if session.live else ''}"
            )
            out.write(line.rstrip() + "\n")
        return EXIT_OK
    removed, live = remove_sessions(older_than_s=None if args.all else args.older_than)
    freed = sum(session.size_bytes for session in removed)
    out.write(f"removed {_plural(len(removed), 'session')} from {where}, {_human_bytes(freed)}")
    out.write(f"; kept {_plural(len(live), 'live session')}\n" if live else "\n")
    return EXIT_OK
