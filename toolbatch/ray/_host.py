"""The session host: a Ray actor holding one or more sessions' ``ToolScheduler``s.

Each session is opened by a long-lived ``serve`` call that enters the scheduler, waits
until the session is closed and exits it in the same task (anyio's scopes and the MCP
clients' task groups must be left by the task that entered them). Every other method is a
short call on the same event loop (an async actor: one loop, one thread).

A batch's responses stay here until the driver completes the turn: the driver sends back
references to them, never the responses themselves, so the finalizer works on the very
objects the producers made (their artifacts, persistence decisions and hook notes), on the
node where the artifacts are. The driver says which batches it still holds (``keep``) with
every call, so abandoned batches are dropped and memory stays bounded.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import structlog

from toolbatch._core import ToolCall, ToolCallResponse, ToolDeclaration
from toolbatch.logs import LogLevel, configure_logging
from toolbatch.ray._codec import (
    Wire,
    decode_call,
    decode_response,
    encode_call,
    encode_declarations,
    encode_response,
    encode_turn,
)
from toolbatch.scheduler import (
    USE_CONFIG,
    PendingTurn,
    Registry,
    SchedulerConfig,
    ToolScheduler,
)

__all__ = ["MAX_PROGRESS_EVENTS", "SessionHost", "SessionSpec", "with_fields"]

log = structlog.get_logger("toolbatch.ray")

MAX_PROGRESS_EVENTS: Final = 1000
"""Progress messages a batch buffers for its observer; later ones are dropped (display only)."""
CLOSE_GRACE_S: Final = 20.0
"""How long a closing session waits for its aborted batches to answer."""
MAX_EARLY_ABORTS: Final = 64
"""Aborts remembered for batches that have not arrived yet."""
MAX_FINISHED_TOKENS: Final = 256
"""Finished batches remembered, so a poll that arrives after its batch ended returns."""
"""Aborts remembered for batches that have not arrived yet."""
NOT_OPEN: Final = "not_open"


RegistryFactory = Callable[[Path], Registry]


def with_fields(config: SchedulerConfig, **changes: Any) -> SchedulerConfig:
    """A copy of a checked config with ``changes``, without checking it again.

    ``dataclasses.replace`` would read its settings and MCP files again, here, where the
    driver's paths may not exist; the values changed are toolbatch's own (a recorder left
    on the driver, a workspace the host made).
    """
    clone = copy.copy(config)
    for name, value in changes.items():
        object.__setattr__(clone, name, value)
    return clone


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """What a host needs to open one session (pickled once per open, with Ray's pickler).

    Attributes:
        session_id: the session's id (its artifact folder and its hooks' session id).
        registry_factory: called on the host with the session's workspace directory.
        config: the session's configuration, its recorder removed (it stays on the driver).
        workspace_dir: where the session's workspace is made (``<dir>/<session_id>``, kept);
            ``None``: a fresh temp directory on the host, removed when the session closes.
    """

    session_id: str
    registry_factory: RegistryFactory
    config: SchedulerConfig
    workspace_dir: str | None = None


@dataclass(slots=True, eq=False)
class _Ask:
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: bool | str = False


class ApprovalFailed(Exception):
    """The driver's approval callback failed (its message is the callback's error)."""


@dataclass(slots=True, eq=False)
class _Batch:
    """One running batch: its abort, the events its driver has not fetched yet."""

    observe: bool
    approval: bool
    positions: dict[int, int]
    collect: bool = True
    abort: anyio.Event = field(default_factory=anyio.Event)
    events: list[list[Any]] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False
    progress: int = 0
    finished: int = 0
    seq: dict[int, int] = field(default_factory=dict)
    asks: dict[int, _Ask] = field(default_factory=dict)
    ask_ids: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, event: list[Any]) -> None:
        self.events.append(event)
        self.wake.set()

    def ref(self, call: ToolCall) -> Any:
        """The call as the driver knows it: its index, else its encoding."""
        index = self.positions.get(id(call))
        return index if index is not None else {"call": encode_call(call)}

    def call_started(self, call: ToolCall) -> None:
        if self.observe:
            self.push(["started", self.ref(call)])

    def call_progress(self, call: ToolCall, message: str) -> None:
        if self.observe and self.progress < MAX_PROGRESS_EVENTS:
            self.progress += 1
            self.push(["progress", self.ref(call), message])

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        if not self.collect:
            return  # the batch is completed here: only its turn is sent
        self.seq[id(response)] = self.finished
        self.finished += 1
        self.push(["finished", self.ref(call) if self.observe else None, encode_response(response)])

    async def approve(self, call: ToolCall, declaration: ToolDeclaration) -> bool:
        ask_id = next(self.ask_ids)
        ask = self.asks[ask_id] = _Ask()
        self.push(["ask", ask_id, self.ref(call), encode_declarations([declaration])[0]])
        try:
            await ask.answered.wait()
        finally:
            del self.asks[ask_id]
        if isinstance(ask.answer, str):
            raise ApprovalFailed(ask.answer)
        return ask.answer


@dataclass(slots=True, eq=False)
class _Hosted:
    """One session on this host."""

    spec: SessionSpec
    opened: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)
    scheduler: ToolScheduler | None = None
    error: str | None = None
    pending: dict[int, PendingTurn] = field(default_factory=dict)
    batches: dict[int, _Batch] = field(default_factory=dict)
    early_aborts: set[int] = field(default_factory=set)
    fingerprint: tuple[int, ...] = ()
    workspace: Path | None = None
    arrived: anyio.Event = field(default_factory=anyio.Event)
    finished: collections.deque[int] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_FINISHED_TOKENS)
    )

    running: int = 0
    idle: anyio.Event = field(default_factory=anyio.Event)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Count a call that uses the scheduler, so closing waits for it to answer."""
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            if self.running == 0:
                self.idle.set()
                self.idle = anyio.Event()

    def announce(self) -> None:
        """Wake the pollers waiting for a batch to arrive or end (each looks again)."""
        self.arrived.set()
        self.arrived = anyio.Event()

    def forget(self, keep: Sequence[int]) -> None:
        """Drop the responses and batches the driver no longer holds."""
        kept = set(keep)
        for token in [t for t in self.pending if t not in kept]:
            del self.pending[token]
        for token in [t for t, b in self.batches.items() if b.done and t not in kept]:
            del self.batches[token]

    def declared(self) -> list[Wire] | None:
        """The declarations when they changed since last sent (MCP servers re-list)."""
        assert self.scheduler is not None
        declarations = self.scheduler.declarations()
        fingerprint = tuple(id(d) for d in declarations)
        if fingerprint == self.fingerprint:
            return None
        self.fingerprint = fingerprint
        return encode_declarations(declarations)


def _open_workspace(spec: SessionSpec) -> tuple[Path, bool]:
    """The session's workspace directory, and whether it is removed at close."""
    if spec.workspace_dir is None:
        return Path(tempfile.mkdtemp(prefix=f"toolbatch-session-{spec.session_id[:40]}-")), True
    path = Path(spec.workspace_dir) / spec.session_id
    path.mkdir(parents=True, exist_ok=True)
    return path, False


class SessionHost:
    """Hosts sessions on the node Ray placed it on (wrapped as a Ray actor by
    ``toolbatch.ray``; not used directly)."""

    def __init__(self, log_level: LogLevel | None = "warning") -> None:
        # A host process is an entry point of its own: its log lines go to its stderr,
        # which Ray keeps in the worker's log file (``None``: leave logging as it is).
        if log_level is not None:
            configure_logging(log_level)
        self._sessions: dict[str, _Hosted] = {}
        self._failures: dict[str, str] = {}
        self._arrived = anyio.Event()
        self._closed_early: set[str] = set()

    def _announce(self) -> None:
        """Wake every ``ready`` waiting for a session to arrive (each looks again)."""
        self._arrived.set()
        self._arrived = anyio.Event()

    async def pid(self) -> int:
        """The host's process id (for tests and diagnostics)."""
        return os.getpid()

    async def serve(self, key: str, spec: SessionSpec) -> None:
        """Open the session, hold it open until ``close(key)``, close it."""
        if key in self._closed_early:
            self._closed_early.discard(key)
            return
        hosted = _Hosted(spec)
        previous = self._sessions.get(key)
        if previous is not None:
            previous.closing.set()
        self._sessions[key] = hosted
        self._announce()
        workspace: Path | None = None
        remove = False
        try:
            workspace, remove = _open_workspace(spec)
            hosted.workspace = workspace
            registry = spec.registry_factory(workspace)
            config = spec.config
            if config.workspace_roots is None:
                config = with_fields(config, workspace_roots=(workspace,))
            async with ToolScheduler(registry, config) as scheduler:
                # The session opens with its tools listed: MCP servers started or failed.
                await scheduler.wait_for_tools()
                hosted.scheduler = scheduler
                hosted.opened.set()
                log.info("ray.session_opened", session_id=spec.session_id, pid=os.getpid())
                await hosted.closing.wait()
                hosted.announce()
                for batch in hosted.batches.values():
                    batch.abort.set()
                # The aborted batches still answer (cancelled), and are completed.
                with anyio.move_on_after(CLOSE_GRACE_S):
                    while hosted.running:
                        await hosted.idle.wait()
                hosted.scheduler = None
        except Exception as exc:
            hosted.error = f"{type(exc).__name__}: {exc}"
            log.warning("ray.session_failed", session_id=spec.session_id, error=hosted.error)
            raise
        finally:
            hosted.opened.set()
            if self._sessions.get(key) is hosted:
                del self._sessions[key]
                if hosted.error is not None:
                    self._failures[key] = hosted.error
                    self._announce()
            if remove and workspace is not None:
                shutil.rmtree(workspace, ignore_errors=True)

    async def ready(self, key: str) -> Wire:
        """Wait for the session to open: its declarations, or why it failed."""
        # ``serve`` may start after this call (Ray orders the starts of an async actor's
        # calls only loosely): wait for it; the driver bounds the wait.
        while (hosted := self._sessions.get(key)) is None and key not in self._failures:
            await self._arrived.wait()
        if hosted is None:
            return {"error": self._failures.pop(key)}
        await hosted.opened.wait()
        if hosted.scheduler is None:
            self._failures.pop(key, None)
            return {"error": hosted.error or "the session closed while opening"}
        hosted.fingerprint = ()
        return {"declarations": hosted.declared(), "workspace": str(hosted.workspace)}

    async def close(self, key: str) -> None:
        """Close the session (its running batches are aborted first)."""
        hosted = self._sessions.get(key)
        if hosted is not None:
            hosted.closing.set()
        else:
            self._closed_early.add(key)  # its serve has not started yet: it will not open

    def _open(self, key: str) -> _Hosted | None:
        hosted = self._sessions.get(key)
        if hosted is None or hosted.scheduler is None:
            return None
        return hosted

    async def execute(self, key: str, request: Wire) -> Wire:
        """Run one batch; the responses stay here under ``token`` until completed.

        ``request``: ``token``, ``calls``, ``observe``, ``approval`` and ``keep`` (one
        positional dict: Ray serializes keyword arguments at about 1 ms a call here).
        """
        token, calls, keep = request["token"], request["calls"], request["keep"]
        observe, approval = request["observe"], request["approval"]
        hosted = self._open(key)
        if hosted is None:
            return {"lost": NOT_OPEN}
        hosted.forget(keep)
        batch, decoded = self._start(hosted, token, calls, observe=observe, approval=approval)
        assert hosted.scheduler is not None
        try:
            with hosted.busy():
                pending = await hosted.scheduler.execute(
                    decoded,
                    abort=batch.abort,
                    observer=batch,
                    approve=batch.approve if approval else None,
                )
        finally:
            self._finish(hosted, token, batch)
        hosted.pending[token] = pending
        return self._result(hosted, batch, pending.responses)

    async def run(self, key: str, request: Wire) -> Wire:
        """Run one batch and complete its turn here: only the turn goes back (``request``:
        as ``execute``'s, plus ``budget``)."""
        token, calls, keep = request["token"], request["calls"], request["keep"]
        observe, approval, budget = request["observe"], request["approval"], request["budget"]
        hosted = self._open(key)
        if hosted is None:
            return {"lost": NOT_OPEN}
        hosted.forget(keep)
        batch, decoded = self._start(hosted, token, calls, observe=observe, approval=approval)
        batch.collect = observe
        scheduler = hosted.scheduler
        assert scheduler is not None
        with hosted.busy():
            try:
                pending = await scheduler.execute(
                    decoded,
                    abort=batch.abort,
                    observer=batch,
                    approve=batch.approve if approval else None,
                )
            finally:
                self._finish(hosted, token, batch)
            turn = await scheduler.complete_turn(
                pending, budget=budget.get("budget", USE_CONFIG), recorder=None
            )
        return {"turn": encode_turn(turn), "declarations": hosted.declared()}

    def _start(
        self,
        hosted: _Hosted,
        token: int,
        calls: Sequence[Any],
        *,
        observe: bool,
        approval: bool,
    ) -> tuple[_Batch, list[Any]]:
        decoded = [decode_call(c["call"]) if "call" in c else c["raw"] for c in calls]
        positions = {id(call): i for i, call in enumerate(decoded) if isinstance(call, ToolCall)}
        batch = _Batch(observe=observe, approval=approval, positions=positions)
        hosted.batches[token] = batch
        hosted.announce()
        if token in hosted.early_aborts:
            hosted.early_aborts.discard(token)
            batch.abort.set()
        return batch, decoded

    def _finish(self, hosted: _Hosted, token: int, batch: _Batch) -> None:
        batch.done = True
        batch.wake.set()
        hosted.finished.append(token)
        hosted.announce()
        if not batch.observe:
            hosted.batches.pop(token, None)

    def _result(self, hosted: _Hosted, batch: _Batch, responses: list[ToolCallResponse]) -> Wire:
        order: list[Any] = []
        for response in responses:
            seq = batch.seq.get(id(response))
            order.append(seq if seq is not None else {"response": encode_response(response)})
        events = [] if batch.observe else batch.events
        return {"order": order, "events": events, "declarations": hosted.declared()}

    async def events(self, key: str, token: int) -> Wire:
        """The batch's events not fetched yet (waits for one); ``done`` after the last."""
        hosted = self._sessions.get(key)
        if hosted is None:
            return {"events": [], "done": True}
        # This call may start before the batch's own (Ray orders their starts only
        # loosely): wait for the batch, unless it already ended.
        while (batch := hosted.batches.get(token)) is None:
            if token in hosted.finished or hosted.closing.is_set():
                return {"events": [], "done": True}
            await hosted.arrived.wait()
        while not batch.events and not batch.done:
            batch.wake = anyio.Event()
            await batch.wake.wait()
        events, batch.events = batch.events, []
        if batch.done:
            hosted.batches.pop(token, None)
        return {"events": events, "done": batch.done}

    async def answer(self, key: str, token: int, ask_id: int, answer: bool | str) -> None:
        """The driver's answer to an approval the batch asked for."""
        hosted = self._sessions.get(key)
        batch = hosted.batches.get(token) if hosted is not None else None
        ask = batch.asks.get(ask_id) if batch is not None else None
        if ask is not None:
            ask.answer = answer
            ask.answered.set()

    async def abort(self, key: str, token: int) -> None:
        """Abort a batch: its running calls are cancelled, their processes stopped."""
        hosted = self._sessions.get(key)
        if hosted is None:
            return
        batch = hosted.batches.get(token)
        if batch is not None:
            batch.abort.set()
        elif token not in hosted.finished and len(hosted.early_aborts) < MAX_EARLY_ABORTS:
            hosted.early_aborts.add(token)

    async def complete(self, key: str, request: Wire) -> Wire:
        """Complete a turn of responses held here (by reference) and sent (the driver's);
        ``request``: ``items``, ``budget`` and ``keep``."""
        items, budget, keep = request["items"], request["budget"], request["keep"]
        hosted = self._open(key)
        if hosted is None:
            return {"lost": NOT_OPEN}
        token = request["token"]
        answered = [(decode_response(item["response"]), item["ordinal"]) for item in items]
        if token is None:
            pending = PendingTurn.answered(response for response, _ in answered)
        else:
            held = hosted.pending.pop(token, None)
            if held is None:
                return {"lost": "expired"}
            pending = held
            for response, ordinal in answered:
                pending.add(response, ordinal=ordinal)
        hosted.forget(keep)
        assert hosted.scheduler is not None
        with hosted.busy():
            turn = await hosted.scheduler.complete_turn(
                pending, budget=budget.get("budget", USE_CONFIG), recorder=None
            )
        return {"turn": encode_turn(turn), "declarations": hosted.declared()}

    async def declarations(self, key: str) -> list[Wire] | None:
        """The session's declarations now (``None`` when it is not open)."""
        hosted = self._open(key)
        if hosted is None:
            return None
        assert hosted.scheduler is not None
        return encode_declarations(hosted.scheduler.declarations())
