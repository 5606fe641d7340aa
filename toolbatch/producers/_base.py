"""The producer protocol: what every tool (shell, MCP, custom) implements.

A producer gets one ``ToolCall`` and a ``ProducerContext`` and returns a ``ToolResult``. It
never sees the batch, the budget or the scheduler: bounding the batch is the finalizer's
job, ordering is the scheduler's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Final, Protocol, runtime_checkable

import anyio
import structlog

from toolbatch._core import ToolCall, ToolDeclaration, ToolResult
from toolbatch.artifacts import ArtifactStore
from toolbatch.sandbox import ProcessPolicy

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "Producer",
    "ProducerContext",
    "ProgressCallback",
    "ToolDeclaration",
]

DEFAULT_CALL_TIMEOUT_S: Final = 120.0
"""The timeout of a call whose producer and configuration set none."""


def current_time() -> float:
    """``anyio.current_time()``, the clock of ``ProducerContext.deadline``, read directly
    from the running asyncio loop when there is one (a fifth of the cost)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:  # another anyio backend
        return anyio.current_time()


ProgressCallback = Callable[[str], None]
"""Receives a short human-readable progress message for the running call."""


def _no_progress(message: str) -> None:
    del message


UNWATCHED_PROGRESS: Final[ProgressCallback] = _no_progress
"""``ProducerContext.progress`` when nobody listens: a producer may then skip progress
reports altogether (the MCP producer asks its server for none)."""

OutputCallback = Callable[[str], None]
"""Receives the running call's output text as it is produced (display only)."""


def _no_output(text: str) -> None:
    del text


UNWATCHED_OUTPUT: Final[OutputCallback] = _no_output
"""``ProducerContext.output`` when nobody listens: a producer then skips decoding its
output for display altogether (the shell forwards nothing)."""


class ProducerContext:
    """What a producer gets besides the call.

    Attributes:
        store: where complete output goes when it is too large to send (``None``: nowhere;
            the producer then shortens without a file and reports ``()``).
        log: a structlog logger bound to this call (``call_id``, ``tool``).
        cancelled: set when the call is aborted. Async producers are also cancelled through
            their cancel scope; a sync tool running in a worker thread can poll this.
        timeout_s: the longest this call may run, as set by the runtime (``None``: the
            producer's own default). Producers that manage their own timeout (shell, MCP)
            use the smaller of this and their own, so they can still return partial output.
        progress: report progress (a short message) while the call runs; never raises.
            It is ``UNWATCHED_PROGRESS`` when nobody listens: a producer may then skip
            making progress reports at all (the MCP producer asks its server for none).
        output: the running call's output text as it comes (the shell's interleaved
            stdout and stderr, decoded), for a live display; never raises. It is
            ``UNWATCHED_OUTPUT`` when nobody listens: a producer then forwards nothing.
        deadline: when set, the runtime itself stops the call at this time (on the anyio
            clock, ``anyio.current_time()``) and answers it with a timeout error; a
            producer may then skip a timeout of its own that would end no sooner.
        process_policy: the sandbox and environment of the commands a producer runs for
            the model (the shell's); ``None``: unconfined, the agent's environment.
        partial_result: set by a producer that is cancelled but kept what the call
            produced so far (the shell's partial output and artifact); the runtime answers
            an aborted call with it (status ``cancelled``) instead of a bare message.
        new_event: makes ``cancelled`` when it is first read (the runtime's: most calls
            never read it, and an event costs as much as the rest of the context); without
            it, ``cancelled`` is made here, as given or new.
    """

    __slots__ = (
        "_cancelled",
        "_new_event",
        "deadline",
        "log",
        "output",
        "partial_result",
        "process_policy",
        "progress",
        "store",
        "timeout_s",
    )

    def __init__(
        self,
        store: ArtifactStore | None = None,
        log: Any = None,
        cancelled: anyio.Event | None = None,
        timeout_s: float | None = None,
        progress: ProgressCallback = UNWATCHED_PROGRESS,
        output: OutputCallback = UNWATCHED_OUTPUT,
        deadline: float | None = None,
        process_policy: ProcessPolicy | None = None,
        partial_result: ToolResult | None = None,
        *,
        new_event: Callable[[], anyio.Event] | None = None,
    ) -> None:
        self.store = store
        self.log = structlog.get_logger("toolbatch.producer") if log is None else log
        if cancelled is None and new_event is None:
            cancelled = anyio.Event()
        self._cancelled = cancelled
        self._new_event = new_event
        self.timeout_s = timeout_s
        self.progress = progress
        self.output = output
        self.deadline = deadline
        self.process_policy = process_policy
        self.partial_result = partial_result

    @property
    def cancelled(self) -> anyio.Event:
        """Set when the call is aborted (see the class attributes)."""
        event = self._cancelled
        if event is None:
            # A sync tool's thread and the event loop may both ask first: one event only.
            with _MAKING_EVENT:
                event = self._cancelled
                if event is None:
                    assert self._new_event is not None
                    event = self._cancelled = self._new_event()
        return event

    @cancelled.setter
    def cancelled(self, event: anyio.Event) -> None:
        self._cancelled = event

    def __repr__(self) -> str:
        return (
            f"ProducerContext(store={self.store!r}, timeout_s={self.timeout_s!r}, "
            f"deadline={self.deadline!r}, process_policy={self.process_policy!r})"
        )


_MAKING_EVENT: Final = threading.Lock()


@runtime_checkable
class Producer(Protocol):
    """A tool implementation. Bring your own object with these two members.

    ``run`` must not raise for bad input: it returns ``ToolResult.failure(...)``. If it does
    raise, the scheduler turns the exception into an error response in the call's place.

    What the runtime honours besides ``run`` is declared on ``declaration``: its
    ``timeout_s`` (the shorter of it and the runtime's ceiling applies) and its
    ``output_threshold`` (output longer than that, when the producer left
    ``persisted_output_files`` undecided, is persisted once and replaced by a
    ~2,000-character preview). Without a threshold the producer is trusted to bound its own
    output (as the shell and MCP producers do); the batch finalizer bounds everything in any
    case.
    """

    @property
    def declaration(self) -> ToolDeclaration:
        """The tool's name, description and input schema."""
        ...

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Run one call and return its result."""
        ...
