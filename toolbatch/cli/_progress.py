"""What ``toolbatch run`` shows while a batch runs: live progress, never the model's text.

One observer of the scheduler (``RunProgress``) feeds three displays, each optional:

* ``stream-json``: a ``tool_progress`` event as each call starts and ends, and while it
  runs when its output or progress report changed (at most once a second per call, at
  least every ``HEARTBEAT_S``): elapsed time, output bytes so far, the tool's latest
  report (``connecting to <server>`` while an MCP server starts, ``step 2/5``, ...).
* a status line on a terminal's stderr: calls done and running, the oldest running call's
  elapsed time, output so far and latest report; redrawn as things change and every
  second, cleared when no call runs.
* ``--verbose``: the running commands' output lines on stderr as they come, each line
  prefixed with its call's id.

Each call also logs ``run.call_started`` and ``run.call_finished`` at info level, so
``--log-level info`` shows the batch as it goes. The model-facing results are the
finalized ones, written after the turn completes (the headless rule); none of this is.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TextIO

import anyio
import structlog

from toolbatch._core import ToolCall, ToolCallResponse
from toolbatch.transports import OutputAdapter

__all__ = ["PROGRESS_INTERVAL_S", "RunProgress", "human_bytes"]

log = structlog.get_logger("toolbatch.cli")

PROGRESS_INTERVAL_S: Final = 1.0
"""A running call gets at most one ``running`` event this often, and the status line is
redrawn (its elapsed time) this often."""
HEARTBEAT_S: Final = 5.0
"""A running call that changed nothing still gets a ``running`` event this often."""
STATUS_LINE_MIN_INTERVAL_S: Final = 0.1
"""The terminal status line is redrawn at most this often on events (progress can be chatty)."""
MAX_PENDING_LINE_CHARS: Final = 4096
"""A ``--verbose`` line longer than this is written in pieces rather than held whole."""


def human_bytes(count: int) -> str:
    """``1,234 B``, ``1.2 KiB``, ``3.4 MiB``, ``5.6 GiB``."""
    size = float(count)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"


@dataclass(slots=True, eq=False)
class _Running:
    call: ToolCall
    started: float
    output_bytes: int = 0
    message: str | None = None
    emitted_at: float = 0.0
    emitted_state: tuple[int, str | None] = (0, None)
    pending_line: str = ""


class RunProgress:
    """The scheduler's observer for ``toolbatch run`` (see the module docstring).

    Args:
        events: the output adapter that gets ``tool_progress`` events (``stream-json``
            only writes them), or ``None``.
        status: a terminal to draw the status line on (stderr), or ``None``.
        verbose: where running commands' output lines go (stderr), or ``None``.
        clock: seconds, monotonic (``time.monotonic``).
    """

    def __init__(
        self,
        *,
        events: OutputAdapter | None = None,
        status: TextIO | None = None,
        verbose: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._events = events
        self._status = status
        self._verbose = verbose
        self._clock = clock
        self._running: dict[str, _Running] = {}
        self._done = 0
        self._drawn_at = 0.0
        self._status_visible = False

    # -- the observer ---------------------------------------------------------------------

    def call_started(self, call: ToolCall) -> None:
        now = self._clock()
        running = _Running(call, now, emitted_at=now)
        self._running[call.id] = running
        log.info("run.call_started", call_id=call.id, tool=call.name)
        if self._events is not None:
            self._events.tool_progress(call, status="started", elapsed_s=0.0, output_bytes=0)
        self._draw(force=True)

    def call_progress(self, call: ToolCall, message: str) -> None:
        running = self._running.get(call.id)
        if running is not None:
            running.message = message
            self._draw()

    def call_output(self, call: ToolCall, text: str) -> None:
        running = self._running.get(call.id)
        if running is None:
            return
        running.output_bytes += len(text.encode("utf-8", "surrogatepass"))
        if self._verbose is not None:
            self._write_lines(running, text)
        self._draw()

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        now = self._clock()
        running = self._running.pop(call.id, None)
        elapsed = 0.0 if running is None else now - running.started
        output_bytes = 0 if running is None else running.output_bytes
        self._done += 1
        if running is not None and running.pending_line and self._verbose is not None:
            self._write_verbose([f"[{call.id}] {running.pending_line}"])
        log.info(
            "run.call_finished",
            call_id=call.id,
            tool=call.name,
            status=response.status,
            elapsed_ms=round(elapsed * 1000),
            output_bytes=output_bytes,
        )
        if self._events is not None:
            self._events.tool_progress(
                call,
                status="finished",
                elapsed_s=elapsed,
                output_bytes=output_bytes,
                message=None if running is None else running.message,
                is_error=response.status != "success",
            )
        self._draw(force=True)

    # -- the clock ------------------------------------------------------------------------

    async def tick(self) -> None:
        """Every ``PROGRESS_INTERVAL_S``: ``running`` events and the status line's clock.
        Runs until cancelled."""
        while True:
            await anyio.sleep(PROGRESS_INTERVAL_S)
            self.emit_running()
            self._draw(force=True)

    def emit_running(self) -> None:
        """A ``running`` event for each call that changed since its last event (or has
        been quiet for ``HEARTBEAT_S``)."""
        if self._events is None:
            return
        now = self._clock()
        for running in list(self._running.values()):
            state = (running.output_bytes, running.message)
            quiet = now - running.emitted_at
            if quiet < PROGRESS_INTERVAL_S:
                continue
            if state == running.emitted_state and quiet < HEARTBEAT_S:
                continue
            running.emitted_at, running.emitted_state = now, state
            self._events.tool_progress(
                running.call,
                status="running",
                elapsed_s=now - running.started,
                output_bytes=running.output_bytes,
                message=running.message,
            )

    def close(self) -> None:
        """Clear the status line (the results follow on stdout)."""
        self._running.clear()
        self._draw(force=True)

    # -- the terminal ---------------------------------------------------------------------

    def _draw(self, *, force: bool = False) -> None:
        stream = self._status
        if stream is None:
            return
        now = self._clock()
        if not force and now - self._drawn_at < STATUS_LINE_MIN_INTERVAL_S:
            return
        self._drawn_at = now
        if not self._running:
            if self._status_visible:
                self._write_status("\r\x1b[K")
                self._status_visible = False
            return
        oldest = min(self._running.values(), key=lambda running: running.started)
        call = oldest.call
        text = (
            f"toolbatch: {self._done} done, {len(self._running)} running; "
            f"{call.name} [{call.id}] {now - oldest.started:.0f}s"
        )
        if oldest.output_bytes:
            text += f", {human_bytes(oldest.output_bytes)} of output"
        if oldest.message:
            text += f": {oldest.message}"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self._write_status("\r\x1b[K" + text[:width])
        self._status_visible = True

    def _write_status(self, text: str) -> None:
        assert self._status is not None
        try:
            self._status.write(text)
            self._status.flush()
        except (OSError, ValueError):  # a closed terminal never breaks the batch
            self._status = None

    def _write_lines(self, running: _Running, text: str) -> None:
        pieces = (running.pending_line + text).split("\n")
        running.pending_line = pieces.pop()
        if len(running.pending_line) > MAX_PENDING_LINE_CHARS:
            pieces.append(running.pending_line)
            running.pending_line = ""
        if pieces:
            prefix = f"[{running.call.id}] "
            self._write_verbose([prefix + piece.rstrip("\r") for piece in pieces])

    def _write_verbose(self, lines: list[str]) -> None:
        stream = self._verbose
        if stream is None:
            return
        try:
            if self._status_visible and self._status is not None:
                self._write_status("\r\x1b[K")
                self._status_visible = False
            stream.write("".join(f"{line}\n" for line in lines))
            stream.flush()
        except (OSError, ValueError):  # stderr went away: the batch goes on
            self._verbose = None
        self._draw(force=True)
