"""Real ACP clients for the adapter's tests.

``running_agent`` runs ``toolbatch acp`` (in this process, or as a subprocess) and
connects the ``acp`` package's own client to it. Every line the agent writes is recorded
raw on its way to the client (``Frames``), so tests can measure the actual frames and read
the notifications in the order they were sent.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    RequestPermissionResponse,
)

LINE_LIMIT_BYTES = 64 * 2**20
WAIT_S = 30.0
POLL_S = 0.02
_AGENT_NUMBERS = itertools.count(1)


def agent_command(*flags: str) -> list[str]:
    """``toolbatch --log-level info acp <flags>``: the agent as an editor starts it."""
    cli = Path(sys.executable).with_name("toolbatch")
    return [str(cli), "--log-level", "info", "acp", *flags]


@dataclass(frozen=True, slots=True)
class Frame:
    """One line the agent wrote: its size in bytes (newline excluded) and its message."""

    size: int
    message: dict[str, Any]


@dataclass(eq=False)
class Frames:
    """Every frame the agent wrote, in order, with a way to wait for one."""

    items: list[Frame] = field(default_factory=list)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def add(self, line: bytes) -> None:
        raw = line.rstrip(b"\n")
        self.items.append(Frame(len(raw), json.loads(raw)))
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[list[Frame]], bool], *, what: str) -> None:
        """Wait until ``predicate(frames)`` holds (fails after ``WAIT_S``)."""
        with anyio.fail_after(WAIT_S):
            while True:
                changed = self._changed
                if predicate(self.items):
                    return
                await changed.wait()
        raise AssertionError(f"never saw {what}")  # pragma: no cover (fail_after raises)

    def updates(self) -> list[dict[str, Any]]:
        """The ``update`` of every ``session/update``, in order."""
        return [
            frame.message["params"]["update"]
            for frame in self.items
            if frame.message.get("method") == "session/update"
        ]

    def of_call(self, tool_call_id: str) -> list[dict[str, Any]]:
        """The updates about one tool call, in order."""
        return [u for u in self.updates() if u.get("toolCallId") == tool_call_id]

    def tool_calls(self) -> list[dict[str, Any]]:
        """The ``tool_call`` updates (one per call the model made), in order."""
        return [u for u in self.updates() if u["sessionUpdate"] == "tool_call"]

    def final(self, tool_call_id: str) -> dict[str, Any]:
        """The last update of a call (its end: completed or failed)."""
        updates = self.of_call(tool_call_id)
        assert updates, f"no updates for {tool_call_id!r}"
        return updates[-1]

    def agent_text(self) -> str:
        return "".join(
            u["content"]["text"]
            for u in self.updates()
            if u["sessionUpdate"] == "agent_message_chunk" and u["content"]["type"] == "text"
        )


class RecordingClient:
    """An ACP client that answers permission requests from a list and records them.

    Args:
        answers: the option ids to pick, in order (``None`` answers ``cancelled``,
            ``"never"`` never answers); when they run out, ``default`` is picked.
    """

    def __init__(self, answers: Sequence[str | None] = (), *, default: str | None = "allow_once"):
        self.answers = list(answers)
        self.default = default
        self.permission_requests: list[dict[str, Any]] = []

    async def request_permission(
        self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            {
                "session_id": session_id,
                "tool_call_id": tool_call.tool_call_id,
                "raw_input": tool_call.raw_input,
                "options": [option.option_id for option in options],
                "option_names": [option.name for option in options],
                "content": [
                    block.content.text
                    for block in tool_call.content or ()
                    if getattr(block.content, "text", None) is not None
                ],
            }
        )
        choice = self.answers.pop(0) if self.answers else self.default
        if choice == "never":  # a client (or a user) that never answers
            await anyio.Event().wait()
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Updates are read from the raw frames instead, in the order they were sent."""

    def on_connect(self, conn: Any) -> None:
        del conn


@dataclass(eq=False)
class RunningAgent:
    """A running agent and the client connected to it."""

    conn: Any
    process: asyncio.subprocess.Process | None  # None: the agent runs in this process
    frames: Frames
    client: RecordingClient
    stderr: Path

    async def initialize(self) -> Any:
        return await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="toolbatch-tests", version="0"),
        )

    async def new_session(self, cwd: Path, mcp_servers: Sequence[Any] = ()) -> str:
        response = await self.conn.new_session(cwd=str(cwd), mcp_servers=list(mcp_servers))
        session_id: str = response.session_id
        return session_id

    async def prompt(self, session_id: str, text: str) -> str:
        """Send a prompt; its stop reason."""
        response = await self.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        stop: str = response.stop_reason
        return stop


async def _relay(source: asyncio.StreamReader, tap: asyncio.StreamReader, frames: Frames) -> None:
    try:
        while line := await source.readline():
            frames.add(line)
            tap.feed_data(line)
    finally:
        tap.feed_eof()


@asynccontextmanager
async def running_agent(
    *flags: str,
    tmp_path: Path,
    client: RecordingClient | None = None,
    initialize: bool = True,
    process: bool = False,
    cwd: Path | None = None,
) -> AsyncIterator[RunningAgent]:
    """``toolbatch acp <flags>`` with a connected client: in this process by default, as an
    editor's subprocess with ``process=True``.

    In this process the agent is what ``toolbatch acp`` runs (the same flags through the
    command line's parser, ``serve_acp`` over two pipes), without a Python start and the
    ACP SDK's import for each test (most of a second of CPU each); the tests of what a
    process does (signals, exit codes, its standard streams) ask for one, and so does a
    working directory (``cwd``: the agent's own, where it finds project settings). The subprocess's
    stderr (its logs) goes to a file under ``tmp_path``. On exit the client closes the
    agent's input, and the agent must end by itself within seconds, without an error.
    """
    client = client if client is not None else RecordingClient()
    stderr = tmp_path / f"agent-{next(_AGENT_NUMBERS)}.log"
    if process or cwd is not None:
        spawn = _agent_process(flags, stderr, cwd)
    else:
        spawn = _agent_in_this_process(flags)
    async with spawn as (stdin, stdout, child):
        frames = Frames()
        tap = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_relay, stdout, tap, frames)
            conn = connect_to_agent(client, stdin, tap)
            agent = RunningAgent(conn, child, frames, client, stderr)
            try:
                if initialize:
                    await agent.initialize()
                yield agent
            finally:
                await conn.close()
                stdin.close()


@asynccontextmanager
async def _agent_process(
    flags: Sequence[str], stderr: Path, cwd: Path | None
) -> AsyncIterator[tuple[asyncio.StreamWriter, asyncio.StreamReader, asyncio.subprocess.Process]]:
    with stderr.open("wb") as stderr_file:
        process = await asyncio.create_subprocess_exec(
            *agent_command(*flags),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr_file,
            limit=LINE_LIMIT_BYTES,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=cwd,
        )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield process.stdin, process.stdout, process
        process.stdin.close()
        with anyio.fail_after(15):
            code = await process.wait()
        log = stderr.read_text()[-3000:]  # noqa: ASYNC240  (a small file, read once)
        assert code == 0, f"the agent exited with {code}: {log}"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def _agent_in_this_process(
    flags: Sequence[str],
) -> AsyncIterator[tuple[asyncio.StreamWriter, asyncio.StreamReader, None]]:
    from toolbatch.acp import AcpStdioTransport, check_model_settings, serve_acp
    from toolbatch.cli._options import _parser
    from toolbatch.cli._runtime import _acp_options

    options = _acp_options(_parser().parse_args(["acp", *flags]))
    check_model_settings(options.model)
    loop = asyncio.get_running_loop()
    agent_in, client_out = os.pipe()
    client_in, agent_out = os.pipe()
    ended: list[BaseException | None] = []
    done = anyio.Event()

    async def serve() -> None:
        try:
            await serve_acp(options, transport=AcpStdioTransport(agent_in, agent_out))
        except BaseException as exc:
            ended.append(exc)
            raise
        else:
            ended.append(None)
        finally:  # as a process's exit would, this ends the client's input
            for fd in (agent_in, agent_out):
                os.close(fd)
            done.set()

    try:
        stdout = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(client_in, "rb", 0)
        )
        write_transport, write_protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(client_out, "wb", 0)
        )
        stdin = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield stdin, stdout, None
            stdin.close()
            with anyio.fail_after(15):
                await done.wait()
        assert ended == [None], f"the agent ended with {ended[0]!r}"
    finally:
        if not ended:  # the agent never started
            for fd in (agent_in, agent_out):
                os.close(fd)


def processes_running(argv: Sequence[str]) -> list[int]:
    """Pids of live (not zombie) processes whose command line is exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == wanted and state != "Z":
            found.append(int(entry.name))
    return found


async def wait_for_processes(*argvs: Sequence[str]) -> None:
    """Wait until a process runs for each command line (fails after ``WAIT_S``)."""
    with anyio.fail_after(WAIT_S):
        # /proc offers nothing to wait on, so it is polled.
        while not all(processes_running(argv) for argv in argvs):  # noqa: ASYNC110
            await anyio.sleep(POLL_S)


def transcript_records(path: Path) -> list[dict[str, Any]]:
    """The JSON records of a transcript file, in order."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trace_records(path: Path) -> list[dict[str, Any]]:
    """What the model received, one record per model request, in order."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
