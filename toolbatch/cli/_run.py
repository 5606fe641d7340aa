"""``toolbatch run``: one batch from a file or stdin, its results in text, json or
stream-json, a recording and a dual output that are written once and never followed."""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO, TextIO

import anyio
import structlog

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    JsonTooDeep,
    TextPart,
    ToolCall,
    Turn,
    UserFile,
)
from toolbatch.cli._progress import RunProgress
from toolbatch.errors import ConfigError, RecorderError
from toolbatch.finalize import budget_from_wire
from toolbatch.recorder import JsonlRecorder
from toolbatch.scheduler import (
    SchedulerConfig,
    ToolScheduler,
    default_registry,
)
from toolbatch.service import (
    batch_result,
    loads_json,
    parse_batch,
    plain_batch,
)
from toolbatch.transports import (
    OutputAdapter,
    dumps_json_line,
    make_output_adapter,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


from toolbatch.cli._options import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    MAX_BATCH_BYTES,
    _UsageError,
)
from toolbatch.cli._runtime import _CLOSED_AT_START, _fail, _is_terminal, _scheduler_config

log = structlog.get_logger("toolbatch.cli")
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


def _read_batch(source: str) -> tuple[list[ToolCall], int | None]:
    """The calls of the batch in ``source`` (a path, or ``-`` for stdin) and its own budget
    as written (``None``: none given)."""
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
    # A batch of the plain shape becomes its calls directly, as a ``serve`` request does;
    # any other is validated, which names each problem (and builds the params' models).
    if isinstance(document, list):
        document = {"calls": document}
    plain = plain_batch(document) if isinstance(document, dict) else None
    if plain is not None:
        return plain
    try:
        batch = parse_batch(document)
    except ConfigError as exc:
        raise _UsageError(f"the batch in {where} has the wrong shape: {exc}") from None
    return batch.tool_calls(), batch.budget


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
    calls, wire_budget = _read_batch(args.batch)
    config = _scheduler_config(args)
    budget = budget_from_wire(wire_budget, config.budget)
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
            calls,
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
    calls: list[ToolCall],
    config: SchedulerConfig,
    budget: int | None,
    stdout: TextIO,
    sidecar: TextIO | None,
    failures: list[str],
) -> int:
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
            # Programs (json, stream-json, the sidecar) get the parts; people the text, and
            # then no parts JSON is made (dumping them first builds their serializer, a
            # tenth of a cold start).
            events_read = args.output_format != "text" or sidecar is not None
            adapter.result(
                num_turns=1,
                is_error=bool(interrupted),
                error=f"interrupted by {stopped_by}: the unfinished calls were cancelled"
                if interrupted
                else None,
                result=dumps_json_line(batch_result(turn)["parts"]) if events_read else None,
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
