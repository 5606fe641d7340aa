"""A session host that dies: the batch is answered in full, in order, and the handle knows."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import ray

from tests.ray.conftest import pid_pipe, read_pid, wait_gone
from tests.ray.test_session import Events, shell
from toolbatch import (
    JsonlRecorder,
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    load_session,
)
from toolbatch.ray import LOST_ERROR_TYPE, SessionPool, open_session, session_registry


async def _kill_during(
    session: Any, pipe: Path, calls: list[Any], **options: Any
) -> tuple[Any, int]:
    """Run ``calls``; once the remote sleep wrote its pid into ``pipe``, SIGKILL the host."""
    host = await session.host_pid()
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            result.append(await session.run_batch(calls, **options))

        tg.start_soon(run)
        sleeper = await read_pid(pipe)
        # The host registers the command's process group with its reaper right after
        # spawning it (toolbatch/_reaper.py: a host killed within that instant leaves the
        # group behind); on a loaded machine the command can write its pid first. One
        # round trip to the host lets the spawning thread finish that step.
        assert await session.host_pid() == host
        os.kill(host, signal.SIGKILL)
    return result[0], sleeper


async def test_host_killed_mid_batch_answers_every_call(tmp_path: Path) -> None:
    """Every call of the batch is answered ``session_lost`` in call order (none lost, none
    twice), the observer hears each once, the remote sleep dies with its host, the handle
    is dead and its next batch is answered without running."""
    pipe = pid_pipe(tmp_path)
    marker = tmp_path / "ran"
    calls = [
        shell("quick", "echo quick"),
        # The pid is reported a moment after the spawn: a host killed between Popen returning
        # and the group's registration with its reaper is the documented gap (sandbox._reaper).
        shell("sleeper", f"sleep 300 & sleep 0.5; echo $! > {pipe}; wait"),
        {"id": "bad", "name": "run_shell_command", "args": "not an object"},
        shell("last", "sleep 200"),
    ]
    events = Events()
    transcript = tmp_path / "t.jsonl"
    config = SchedulerConfig(recorder=JsonlRecorder(transcript))
    async with open_session(session_registry, config) as session:
        turn, sleeper = await _kill_during(session, pipe, calls, observer=events)
        assert session.dead
        assert session.state == "dead"
        assert "Actor" in (session.lost_reason or "")
        again = await session.run_batch([shell("next", f"touch {marker}")])
    assert [r.call_id for r in turn.responses] == ["quick", "sleeper", "bad", "last"]
    assert {r.error_type for r in turn.responses} == {LOST_ERROR_TYPE}
    assert all("session host" in (r.error or "") for r in turn.responses)
    assert sorted(events.finished) == sorted(events.started) == sorted(c["id"] for c in calls)
    assert wait_gone([sleeper]) == []
    assert again.responses[0].error_type == LOST_ERROR_TYPE
    assert "was not run" in (again.responses[0].error or "")
    assert not marker.exists()
    recorded = [entry for entry in load_session(transcript) if entry.type == "tool_turn"]
    assert [[r.call_id for r in entry.responses] for entry in recorded] == [
        ["quick", "sleeper", "bad", "last"],
        ["next"],
    ]


async def test_restarted_host_opens_a_fresh_session(tmp_path: Path) -> None:
    """With ``max_restarts=1`` the lost batch is still answered ``session_lost`` (never run
    twice); the next batch runs on a new session, in a new workspace and process."""
    pipe = pid_pipe(tmp_path)
    async with open_session(session_registry, max_restarts=1) as session:
        first_host, first_workspace = await session.host_pid(), session.workspace
        await session.run_batch([shell("w", "echo kept > note")])
        turn, _ = await _kill_during(
            session, pipe, [shell("s", f"sleep 300 & sleep 0.5; echo $! > {pipe}; wait")]
        )
        assert session.state == "lost"
        again = await session.run_batch([shell("a", "ls; echo alive")])
        assert session.state == "open"
        assert session.restarts == 1
        assert await session.host_pid() != first_host
        assert session.workspace != first_workspace
    assert turn.responses[0].error_type == LOST_ERROR_TYPE
    output = again.responses[0].parts[0].function_response.response["output"]
    assert "alive" in output
    assert "note" not in output


async def test_host_lost_between_execute_and_complete() -> None:
    """Responses executed on a host that died before the turn was completed are answered
    ``session_lost`` (their unbounded output is never sent); the driver's own are kept."""
    async with open_session(session_registry) as session:
        executed = await session.execute([shell("x", "seq 1 100")])
        skipped = ToolCallResponse.failed(
            ToolCall(id="y", name="run_shell_command"),
            "skipped: at most 1 call per turn",
            status="skipped",
            error_type="skipped",
        )
        executed.add(skipped, ordinal=1)
        ray.kill(session.actor)
        turn = await session.complete_turn(executed)
        assert session.dead
    assert [r.error_type for r in turn.responses] == [LOST_ERROR_TYPE, "skipped"]
    assert "could not be bounded" in (turn.responses[0].error or "")


async def test_one_host_lost_in_a_pool_loses_only_its_sessions(tmp_path: Path) -> None:
    """Sessions sharing a host share its fate; the other hosts' sessions go on."""
    async with SessionPool(4, session_registry, sessions_per_host=2) as pool:
        assert pool[0].actor is pool[1].actor
        assert pool[2].actor is not pool[0].actor
        os.kill(await pool[0].host_pid(), signal.SIGKILL)
        turns = [
            await session.run_batch([shell(f"c{i}", "echo ok")]) for i, session in enumerate(pool)
        ]
        states = [session.state for session in pool]
    assert states == ["dead", "dead", "open", "open"]
    assert [t.responses[0].error_type for t in turns] == [
        LOST_ERROR_TYPE,
        LOST_ERROR_TYPE,
        None,
        None,
    ]
