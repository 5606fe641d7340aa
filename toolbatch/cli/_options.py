"""The command line's options, declared once for ``run``, ``serve`` and ``acp``; its exit
codes and limits; the usage error."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import structlog

import toolbatch
from toolbatch.acp import DEFAULT_MAX_SESSIONS, MODEL_CHOICES
from toolbatch.artifacts import (
    SESSION_MAX_AGE_S,
)
from toolbatch.cli._config_sources import add_config_options
from toolbatch.errors import ConfigError
from toolbatch.finalize import DEFAULT_BATCH_BUDGET_CHARS, Budget, budget_from_wire
from toolbatch.permissions import PERMISSION_MODES
from toolbatch.sandbox import sandbox_flags
from toolbatch.scheduler import (
    DEFAULT_CALL_TIMEOUT_CEILING_S,
    DEFAULT_CONCURRENCY,
)
from toolbatch.service import (
    MAX_MESSAGE_BYTES,
)
from toolbatch.transports import (
    OutputFormat,
)

if TYPE_CHECKING:
    pass

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
    """A number of characters as written (``200_000`` and ``200,000`` too), ``>= 0``."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"budget must be a whole number of characters >= 0 (0 disables it), got {text!r}"
        )
    return value


def _session_budget(text: str) -> Budget:
    """``--budget`` of ``run``, ``serve`` and ``acp``, normalised here, where it enters:
    the session's budget (``SchedulerConfig.batch_budget``), ``0`` for none (``None``)."""
    return budget_from_wire(_budget(text), None)


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
        type=_session_budget,
        default=DEFAULT_BATCH_BUDGET_CHARS,
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
    _add_sandbox_options(options)
    return options


def _add_sandbox_options(options: argparse.ArgumentParser) -> None:
    """One flag per ``SandboxOptions`` field, as its declaration says (``sandbox_flags``).

    Nothing defaults here: a flag left out is ``None`` and the option keeps the default
    its declaration gives (``sandbox_values``).
    """
    for name, cli in sandbox_flags():
        if cli.kind == "switch":
            options.add_argument(
                cli.flag, dest=name, action="store_const", const=True, default=None, help=cli.help
            )
            if cli.negation is not None:
                options.add_argument(
                    cli.negation,
                    dest=name,
                    action="store_const",
                    const=False,
                    help=cli.negation_help,
                )
        elif cli.kind == "choice":
            options.add_argument(
                cli.flag, dest=name, choices=cli.choices, metavar=cli.metavar, help=cli.help
            )
        elif cli.kind == "assignments":
            options.add_argument(
                cli.flag,
                dest=name,
                action="append",
                type=_env_assignment,
                metavar=cli.metavar,
                help=cli.help,
            )
        else:
            options.add_argument(
                cli.flag, dest=name, action="append", metavar=cli.metavar, help=cli.help
            )


def sandbox_values(args: argparse.Namespace) -> dict[str, Any]:
    """The ``SandboxOptions`` the sandbox flags set, by field name (flags left out are not
    in it, so the options keep their declared defaults)."""
    values: dict[str, Any] = {}
    for name, cli in sandbox_flags():
        given = getattr(args, name, None)
        if given is None:
            continue
        if cli.kind == "list":
            given = tuple(given)
        elif cli.kind == "assignments":
            given = dict(given)
        values[name] = given
    return values


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
