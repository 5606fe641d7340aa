"""One remote session driven like a local scheduler: agent loop, recorder, observer,
approval, budget, abort and MCP, all on a host process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.ray._tools import mcp_document, no_tools, shell_and_pid
from tests.ray.conftest import (
    background_sleep,
    parent_pid,
    pid_alive,
    pid_pipe,
    read_pid,
    wait_gone,
)
from toolbatch import JsonlRecorder, SchedulerConfig, ToolCall, ToolScheduler, load_session
from toolbatch.agent import AgentLoop, HeadlessRuntime, InteractiveRuntime, ScriptedModel
from toolbatch.errors import ConfigError, SessionHostError
from toolbatch.ray import LOST_ERROR_TYPE, SessionPool, open_session, session_registry


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


class Events:
    """A BatchObserver that keeps what it is told."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.finished: list[str] = []
        self.progress: list[str] = []

    def call_started(self, call: ToolCall) -> None:
        self.started.append(call.id)

    def call_progress(self, call: ToolCall, message: str) -> None:
        self.progress.append(call.id)

    def call_finished(self, call: ToolCall, response: Any) -> None:
        self.finished.append(call.id)


async def test_agent_loop_runs_unchanged_against_a_remote_session(tmp_path: Path) -> None:
    """A real AgentLoop drives a remote session: commands run in the host's workspace, in
    another process; the driver's transcript holds exactly the turns the loop received."""
    transcript = tmp_path / "session.jsonl"
    recorder = JsonlRecorder(transcript)
    config = SchedulerConfig(batch_budget=4_000, recorder=recorder)
    model = ScriptedModel(
        [
            [
                shell("a", "pwd"),
                {"id": "b", "name": "host_pid", "args": {}},
                {"id": "c", "name": "no_such_tool", "args": {}},
            ],
            [shell("a", "echo again"), shell("d", "seq 1 20000")],  # "a" is a duplicate
            "done",
        ]
    )
    async with open_session(shell_and_pid, config) as session:
        loop = AgentLoop(model, session, runtime=HeadlessRuntime())
        outcome = await loop.prompt("go")
        host = await session.host_pid()
    assert outcome.stop_reason == "end_turn"
    first, second = outcome.turns
    assert [r.call_id for r in first.responses] == ["a", "b", "c"]
    assert (
        first.responses[0]
        .parts[0]
        .function_response.response["output"]
        .startswith(session.workspace)
    )
    assert first.responses[1].parts[0].function_response.response["output"] == str(host)
    assert host != os.getpid()
    assert first.responses[2].error_type == "unknown_tool"
    assert [(r.call_id, r.status) for r in second.responses] == [
        ("a", "duplicate"),
        ("d", "success"),
    ]
    assert second.content_length <= 4_000
    # The complete output was persisted once, on the host, where the finalizer ran.
    (saved,) = second.responses[1].persisted_output_files or ()
    assert "\n19999\n20000\n" in saved.read_text()
    recorded = [entry for entry in load_session(transcript) if entry.type == "tool_turn"]
    assert [entry.kinds for entry in recorded] == [
        ["executed", "executed", "synthetic"],
        ["duplicate", "executed"],
    ]
    for entry, turn in zip(recorded, outcome.turns, strict=True):
        assert json.dumps([p.model_dump(mode="json") for p in entry.parts]) == json.dumps(
            [p.model_dump(mode="json") for p in turn.parts]
        )
        assert [r.persisted_output_files for r in entry.responses] == [
            r.persisted_output_files for r in turn.responses
        ]


async def test_remote_turns_equal_local_turns(tmp_path: Path) -> None:
    """The same batch through a remote session and a local scheduler gives the same turn."""
    calls = [shell("x", "seq 1 3000"), shell("y", "echo small"), shell("z", "exit 3")]
    config = SchedulerConfig(batch_budget=1_500)
    async with open_session(session_registry, config) as session:
        remote = await session.run_batch(calls)
        executed = await session.execute(calls)
        completed = await session.complete_turn(executed, budget=800)
    async with ToolScheduler(session_registry(tmp_path), config) as local:
        expected = await local.run_batch(calls)

    def texts(turn: Any) -> list[str]:
        return [
            json.dumps(p.model_dump(mode="json")).replace(str(tmp_path), "<ws>") for p in turn.parts
        ]

    def shape(turn: Any) -> list[tuple[str, str, int]]:
        return [(r.call_id, r.status, r.content_length) for r in turn.responses]

    assert shape(remote) == shape(expected)
    assert [r.status for r in completed.responses] == [r.status for r in expected.responses]
    assert completed.content_length <= 800 < remote.content_length <= 1_500
    assert len(texts(remote)) == len(texts(expected))


async def test_observer_and_approval_cross_the_wire() -> None:
    """The driver's observer hears every call once, started before finished, and the
    driver's approve callback decides whether the remote shell runs."""
    asked: list[str] = []

    def approve(call: ToolCall, declaration: Any) -> bool:
        asked.append(call.id)
        return call.args["command"] != "touch denied"

    async with open_session(shell_and_pid) as session:
        assert session.producer("run_shell_command").declaration.needs_permission
        assert session.producer("host_pid").declaration.read_only
        events = Events()
        turn = await session.run_batch(
            [shell("ok", "echo yes"), shell("no", "touch denied"), {"id": "p", "name": "host_pid"}],
            observer=events,
            approve=approve,
        )
        assert not (Path(session.workspace) / "denied").exists()
        loop_events = Events()
        loop = AgentLoop(
            ScriptedModel([[shell("i", "echo hi")], "end"]),
            session,
            runtime=InteractiveRuntime(approve=approve),
        )
        outcome = await loop.prompt("go", observer=loop_events)
    assert sorted(asked) == ["i", "no", "ok"]
    assert [r.status for r in turn.responses] == ["success", "error", "success"]
    assert turn.responses[1].error_type == "permission_denied"
    assert sorted(events.started) == sorted(events.finished) == ["no", "ok", "p"]
    assert loop_events.finished == ["i"]
    assert outcome.turns[0].responses[0].status == "success"


async def test_abort_stops_the_remote_command(tmp_path: Path) -> None:
    """The driver's abort reaches the host: the remote ``sleep`` is killed (its pid is
    gone) and the call is answered ``cancelled``."""
    pipe = pid_pipe(tmp_path)
    abort = anyio.Event()
    async with open_session(session_registry) as session:
        async with anyio.create_task_group() as tg:
            result: list[Any] = []

            async def run() -> None:
                result.append(
                    await session.run_batch(
                        [shell("s", f"{background_sleep(pipe)}; wait")], abort=abort
                    )
                )

            tg.start_soon(run)
            pid = await read_pid(pipe)
            assert pid_alive(pid)
            abort.set()
        assert wait_gone([pid]) == []
        (turn,) = result
        assert turn.responses[0].status == "cancelled"
        again = await session.run_batch([shell("t", "echo still here")])
    assert again.responses[0].status == "success"


async def test_driver_cancellation_aborts_the_remote_batch(tmp_path: Path) -> None:
    """A driver task cancelled mid-batch (a timeout) stops the remote command too."""
    pipe = pid_pipe(tmp_path)
    pids: list[int] = []
    async with open_session(session_registry) as session:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_when_started() -> None:
                    pids.append(await read_pid(pipe))
                    scope.cancel()

                tg.start_soon(cancel_when_started)
                await session.execute([shell("s", f"{background_sleep(pipe)}; wait")])
        assert scope.cancelled_caught
        assert wait_gone(pids) == []


async def test_mcp_server_runs_on_the_host() -> None:
    """An MCP server configured for a remote session starts on its host, answers there,
    and is stopped when the session closes."""
    config = SchedulerConfig(mcp_servers=mcp_document())
    async with open_session(session_registry, config) as session:
        names = {d.name for d in session.declarations()}
        echo = next(name for name in names if name.endswith("echo"))
        pid_tool = next(name for name in names if name.endswith("pid") and "host" not in name)
        turn = await session.run_batch(
            [
                {"id": "e", "name": echo, "args": {"text": "over the wire"}},
                {"id": "p", "name": pid_tool, "args": {}},
            ]
        )
        host = await session.host_pid()
        server = int(turn.responses[1].parts[0].function_response.response["output"])
        parent = parent_pid(server)
        assert pid_alive(server)
    assert turn.responses[0].parts[0].function_response.response["output"] == "over the wire"
    assert parent == host  # the host process started it
    assert wait_gone([server]) == []


async def test_bad_pool_options_are_config_errors(tmp_path: Path) -> None:
    """Bad options fail at construction, naming the value and the fix."""
    with pytest.raises(ConfigError, match="resources"):
        SessionPool(2, session_registry, resources={"CPU": -1})
    with pytest.raises(ConfigError, match="artifacts_dir"):
        from toolbatch import ArtifactStore

        SessionPool(2, session_registry, SchedulerConfig(store=ArtifactStore(tmp_path)))
    with pytest.raises(ConfigError, match="max_restarts"):
        SessionPool(2, session_registry, max_restarts=-2)
    with pytest.raises(ConfigError, match="size"):
        SessionPool(0, session_registry)
    with pytest.raises(ConfigError, match="same recorder"):
        SessionPool(2, session_registry, SchedulerConfig(recorder=JsonlRecorder(tmp_path / "t")))


async def test_a_session_that_cannot_open_names_why() -> None:
    """A registry factory failing on the host fails the pool's open with its message, and
    the host is ended (nothing left running)."""
    pool = SessionPool(1, no_tools)
    with pytest.raises(SessionHostError, match="no tools for"):
        async with pool:
            pass
    assert pool.hosts == []


def test_import_without_ray_names_the_extra() -> None:
    """Without Ray installed, ``import toolbatch.ray`` says how to get it; ``import
    toolbatch`` never imports Ray."""
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import toolbatch; assert 'ray' not in [m for m in sys.modules if sys.modules[m]]\n"
        "try:\n    import toolbatch.ray\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "pip install 'toolbatch[ray]'" in out


def test_lost_error_type_is_stable() -> None:
    """The error type of lost calls is part of the contract."""
    assert LOST_ERROR_TYPE == "session_lost"
