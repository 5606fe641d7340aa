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
import atexit
import contextlib
import functools
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

import anyio
import structlog

from toolbatch.artifacts import (
    SESSION_MAX_AGE_S,
    list_sessions,
    remove_sessions,
    sessions_dir,
)
from toolbatch.errors import ConfigError, ToolbatchError
from toolbatch.logs import configure_logging
from toolbatch.telemetry import export_from_environment

if TYPE_CHECKING:
    pass

__all__ = ["console_main", "main"]

from toolbatch.cli._options import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, _parser
from toolbatch.cli._run import _command_run, _plural
from toolbatch.cli._runtime import (
    _CLOSED_AT_START,
    _command_acp,
    _command_serve,
    _fail,
    _reopen_closed_standard_fds,
    _scheduler_config,
)

log = structlog.get_logger("toolbatch.cli")


def console_main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``toolbatch`` script and ``python -m toolbatch.cli``: :func:`main`, then the
    process ends without the interpreter's teardown.

    Everything a normal exit does for the user still happens: the exit handlers run
    (``atexit``: telemetry's last export, the sandbox's reaper, temporary directories) and
    the standard streams are flushed; every file the command writes for the user is closed
    before :func:`main` returns. What is skipped is clearing every module and collecting
    what the imported SDKs built: 0.05-0.1 s of CPU and of wall time after a plain ``toolbatch
    run``, 0.2 s after one with MCP servers. An exception ends the process the usual way.
    """
    code = main(argv)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: the descriptor was closed when Python started
            with contextlib.suppress(OSError, ValueError):  # a closed or gone reader
                stream.flush()
    os._exit(code)


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
