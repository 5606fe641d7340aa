"""``toolbatch acp`` driven by the ``acp`` package's own client, as an editor drives it.

Every test spawns the agent as a subprocess and reads the frames it actually wrote.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from toolbatch import FunctionResponsePart, parts_adapter
from toolbatch._core._wire import model_text_length
from toolbatch.transports import ACP_MARKER, ACP_TOOL_RESULT_JSON_BYTES, json_string_bytes

from ._support import (
    Frame,
    RecordingClient,
    processes_running,
    running_agent,
    trace_records,
    transcript_records,
    wait_for_processes,
)

FRAME_LIMIT_BYTES = 200 * 2**10
"""No frame an editor receives may come near this (ACP's projection keeps them ~130 KiB)."""


def _content_text(update: dict[str, Any]) -> str:
    (block,) = update["content"]
    assert block["type"] == "content"
    assert block["content"]["type"] == "text"
    text: str = block["content"]["text"]
    return text


def _outputs(parts: list[Any]) -> dict[str, dict[str, Any]]:
    """Each function response's body, by call id."""
    return {
        part["functionResponse"]["id"]: part["functionResponse"]["response"]
        for part in parts
        if "functionResponse" in part
    }


def _tool_turns(path: Path) -> list[dict[str, Any]]:
    return [record for record in transcript_records(path) if record["type"] == "tool_turn"]


def _tool_messages(path: Path) -> list[dict[str, Any]]:
    return [record for record in trace_records(path) if record["role"] == "tool"]


async def test_a_prompt_runs_each_command_line_as_one_reported_batch(tmp_path: Path) -> None:
    """Three `$ ` lines: three calls announced, run, and ended with their output, in order."""
    async with running_agent("--auto-approve", tmp_path=tmp_path, initialize=False) as agent:
        hello = await agent.initialize()
        assert hello.protocol_version == 1
        assert hello.agent_info.name == "toolbatch"
        assert hello.agent_capabilities.load_session is False  # no --transcript-dir
        session = await agent.new_session(tmp_path)

        stop = await agent.prompt(
            session, "Please run these:\n$ echo alpha\n$ echo beta >&2; exit 3\n$ printf gamma"
        )

        assert stop == "end_turn"
        frames = agent.frames
        started = frames.tool_calls()
        assert [u["rawInput"] for u in started] == [
            {"command": "echo alpha"},
            {"command": "echo beta >&2; exit 3"},
            {"command": "printf gamma"},
        ]
        assert {(u["kind"], u["status"]) for u in started} == {("execute", "pending")}
        assert started[0]["title"] == "`echo alpha`"
        ids = [u["toolCallId"] for u in started]
        assert len(set(ids)) == 3
        expected = {ids[0]: "alpha\n", ids[1]: "beta\n", ids[2]: "gamma"}
        for tool_call_id, output in expected.items():
            updates = frames.of_call(tool_call_id)
            assert [u["sessionUpdate"] for u in updates[:2]] == ["tool_call", "tool_call_update"]
            assert updates[1]["status"] == "in_progress"
            end = updates[-1]
            assert end["status"] == "completed"
            assert _content_text(end).startswith(output)
            assert end["rawOutput"] == _content_text(end)
        assert "[exit code: 3]" in _content_text(frames.final(ids[1]))
        # Each reply is its own paragraph: the editor joins chunks, words never run together.
        text = frames.agent_text()
        assert text.startswith("Running 3 command(s).\n\n3 tool call(s) finished:\n")
        # The prompt's answer comes after every update about it.
        assert frames.items[-1].message["result"] == {"stopReason": "end_turn"}

        with pytest.raises(RequestError, match="unknown session 'no-such-session'"):
            await agent.prompt("no-such-session", "$ echo hi")


async def test_large_results_reach_the_editor_bounded_and_the_model_as_recorded(
    tmp_path: Path,
) -> None:
    """Big output: small ACP frames, full output on disk once, the model gets the record."""
    transcripts, trace, artifacts = tmp_path / "t", tmp_path / "trace.jsonl", tmp_path / "a"
    flags = ["--auto-approve", "--budget", "12000", "--transcript-dir", str(transcripts)]
    flags += ["--trace-model", str(trace), "--artifacts-dir", str(artifacts)]
    async with running_agent(*flags, tmp_path=tmp_path) as agent:
        session = await agent.new_session(tmp_path)
        stop = await agent.prompt(
            session, "$ seq 1 400000\n$ python3 -c \"print('漢' * 24000)\"\n$ echo small"
        )
        assert stop == "end_turn"
        frames = agent.frames

    # What the editor saw: every frame bounded, each display field within the ACP budget.
    assert max(frame.size for frame in frames.items) < FRAME_LIMIT_BYTES
    for update in frames.updates():
        if update["sessionUpdate"] == "tool_call_update" and "content" in update:
            assert json_string_bytes(_content_text(update)) <= ACP_TOOL_RESULT_JSON_BYTES
            if update.get("status") != "in_progress":  # a running call's lines have none
                assert json_string_bytes(update["rawOutput"]) <= ACP_TOOL_RESULT_JSON_BYTES
    seq_id, han_id, small_id = (u["toolCallId"] for u in frames.tool_calls())
    seq_display = _content_text(frames.final(seq_id))
    assert "400000\n" in seq_display
    assert seq_display.endswith("[exit code: 0]")
    han_display = _content_text(frames.final(han_id))
    assert ACP_MARKER in han_display
    assert han_display.startswith("漢" * 1000)
    assert json_string_bytes(han_display) > 60_000  # the display, not the model's 12,000
    assert _content_text(frames.final(small_id)).startswith("small\n")

    # What the model received is exactly what was recorded, and within the budget.
    (turn,) = _tool_turns(transcripts / f"{session}.jsonl")
    (received,) = _tool_messages(trace)
    assert received["parts"] == turn["parts"]
    parts = parts_adapter.validate_python(turn["parts"])
    assert model_text_length(parts) <= 12_000
    assert all(isinstance(part, FunctionResponsePart) for part in parts)
    outputs = _outputs(turn["parts"])
    assert outputs["call-3"]["output"].startswith("small\n")
    assert "漢" * 24000 not in outputs["call-2"]["output"]

    # The complete output of each cut call is on disk, once.
    files = sorted(path for path in (artifacts / session).rglob("*") if path.is_file())
    assert len(files) == 2
    contents = [path.read_text(encoding="utf-8") for path in files]
    seq_full = "".join(f"{n}\n" for n in range(1, 400_001))
    assert sum(seq_full in text for text in contents) == 1
    assert sum("漢" * 24000 in text for text in contents) == 1
    for path in files:
        assert str(path) in json.dumps(turn["parts"], ensure_ascii=False)


async def test_an_unanswered_permission_request_ends_with_the_call_timeout(
    tmp_path: Path,
) -> None:
    """A client that never answers: after --timeout the call fails saying so, and the
    prompt ends instead of waiting for ever."""
    work = tmp_path / "work"
    work.mkdir()
    client = RecordingClient(["never"])
    async with running_agent("--timeout", "1", tmp_path=tmp_path, client=client) as agent:
        session = await agent.new_session(work)
        with anyio.fail_after(30):
            assert await agent.prompt(session, "$ touch never.txt") == "end_turn"
        (asked,) = client.permission_requests
        end = agent.frames.final(asked["tool_call_id"])
        assert end["status"] == "failed"
        assert "did not answer the permission request within 1 s" in _content_text(end)
    assert not (work / "never.txt").exists()


async def test_permission_is_asked_and_a_rejection_is_an_error_the_model_sees(
    tmp_path: Path,
) -> None:
    """Allow once, reject, allow always: the shell runs only when the user allowed it."""
    work = tmp_path / "work"
    work.mkdir()
    trace = tmp_path / "trace.jsonl"
    client = RecordingClient(["allow_once", "reject_once", "allow_always"], default="reject_once")
    async with running_agent(
        "--trace-model", str(trace), tmp_path=tmp_path, client=client
    ) as agent:
        session = await agent.new_session(work)
        frames = agent.frames

        assert await agent.prompt(session, "$ touch allowed.txt") == "end_turn"
        (asked,) = client.permission_requests
        assert asked["raw_input"] == {"command": "touch allowed.txt"}
        assert asked["options"] == ["allow_once", "allow_always", "reject_once"]
        assert (work / "allowed.txt").exists()
        order = [_kind_of(frame) for frame in frames.items]
        assert order.index("tool_call") < order.index("session/request_permission")
        assert frames.final(asked["tool_call_id"])["status"] == "completed"

        assert await agent.prompt(session, "$ touch rejected.txt") == "end_turn"
        rejected = client.permission_requests[1]
        assert not (work / "rejected.txt").exists()
        end = frames.final(rejected["tool_call_id"])
        assert end["status"] == "failed"
        assert "did not allow" in _content_text(end)
        model_saw = _outputs(_tool_messages(trace)[-1]["parts"])
        assert "did not allow" in next(iter(model_saw.values()))["error"]
        assert "failed: the user did not allow" in frames.agent_text()

        assert await agent.prompt(session, "$ touch one.txt\n$ touch two.txt") == "end_turn"
        assert len(client.permission_requests) == 3  # "always" covered the second call
        assert await agent.prompt(session, "$ touch three.txt") == "end_turn"
        assert len(client.permission_requests) == 3
        assert {p.name for p in work.iterdir()} == {
            "allowed.txt",
            "one.txt",
            "two.txt",
            "three.txt",
        }


def _kind_of(frame: Frame) -> str:
    message = frame.message
    if message.get("method") == "session/update":
        kind: str = message["params"]["update"]["sessionUpdate"]
        return kind
    return str(message.get("method", "response"))


async def test_cancel_and_shutdown_stop_the_running_tools(tmp_path: Path) -> None:
    """session/cancel ends the prompt `cancelled` and the session goes on; SIGTERM ends all.

    Either way no `sleep` the agent started outlives it.
    """
    transcripts = tmp_path / "t"
    flags = ["--auto-approve", "--transcript-dir", str(transcripts)]
    # A process: the editor stops it with SIGTERM at the end.
    async with running_agent(*flags, tmp_path=tmp_path, process=True) as agent:
        session = await agent.new_session(tmp_path)
        frames = agent.frames
        stop: list[str] = []

        async def run_prompt() -> None:
            stop.append(await agent.prompt(session, "$ sleep 3127\n$ sleep 3128; echo never"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_prompt)
            await frames.wait_for(
                lambda items: (
                    sum(1 for u in frames.updates() if u.get("status") == "in_progress") == 2
                ),
                what="both calls running",
            )
            await wait_for_processes(["sleep", "3127"], ["sleep", "3128"])
            with pytest.raises(RequestError, match="already running a prompt"):
                await agent.prompt(session, "$ echo meanwhile")
            await agent.conn.cancel(session_id=session)

        assert stop == ["cancelled"]
        assert processes_running(["sleep", "3127"]) == []
        assert processes_running(["sleep", "3128"]) == []
        for started in frames.tool_calls():
            end = frames.final(started["toolCallId"])
            assert end["status"] == "failed"
            assert "cancelled" in _content_text(end)
        (turn,) = _tool_turns(transcripts / f"{session}.jsonl")
        assert [r["status"] for r in turn["responses"]] == ["cancelled", "cancelled"]

        assert await agent.prompt(session, "$ echo after-cancel") == "end_turn"
        last = frames.tool_calls()[-1]["toolCallId"]
        assert _content_text(frames.final(last)).startswith("after-cancel\n")

        # The editor stops the agent with SIGTERM while a command runs.
        lost: list[Exception] = []

        async def run_until_shutdown() -> None:
            try:
                await agent.prompt(session, "$ sleep 3130")
            except ConnectionError as exc:  # the agent is gone before it answers
                lost.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_until_shutdown)
            await wait_for_processes(["sleep", "3130"])
            assert agent.process is not None
            agent.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                assert await agent.process.wait() == 0
        assert processes_running(["sleep", "3130"]) == []
        assert len(lost) == 1


async def test_load_session_replays_the_transcript_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """A second agent process shows a recorded session again, bounded, and continues it."""
    transcripts = tmp_path / "t"
    flags = ["--auto-approve", "--transcript-dir", str(transcripts)]
    prompt = "Two things:\n$ echo first-run\n$ python3 -c \"print('漢' * 24000)\""
    async with running_agent(*flags, tmp_path=tmp_path) as first:
        session = await first.new_session(tmp_path)
        assert await first.prompt(session, prompt) == "end_turn"

    async with running_agent(*flags, tmp_path=tmp_path, initialize=False) as second:
        hello = await second.initialize()
        assert hello.agent_capabilities.load_session is True
        await second.conn.load_session(cwd=str(tmp_path), session_id=session, mcp_servers=[])
        replay = second.frames.updates()

        kinds = [u["sessionUpdate"] for u in replay]
        assert kinds[0] == "user_message_chunk"
        assert replay[0]["content"]["text"] == prompt
        started = [u for u in replay if u["sessionUpdate"] == "tool_call"]
        assert [u["rawInput"]["command"] for u in started] == [
            "echo first-run",
            "python3 -c \"print('漢' * 24000)\"",
        ]
        ends = [u for u in replay if u["sessionUpdate"] == "tool_call_update"]
        assert [u["toolCallId"] for u in ends] == [u["toolCallId"] for u in started]
        assert [u["status"] for u in ends] == ["completed", "completed"]
        assert _content_text(ends[0]).startswith("first-run\n")
        assert ACP_MARKER in _content_text(ends[1])  # the recorded 72 KB output, projected
        assert max(frame.size for frame in second.frames.items) < FRAME_LIMIT_BYTES
        replayed = [u for u in replay if u["sessionUpdate"] == "agent_message_chunk"]
        assert replayed[0]["content"]["text"] == "Running 2 command(s)."
        assert replayed[1]["content"]["text"].startswith("\n\n2 tool call(s) finished:")

        assert await second.prompt(session, "$ echo second-run") == "end_turn"
        last = second.frames.tool_calls()[-1]["toolCallId"]
        end = second.frames.final(last)
        assert end["status"] == "completed"
        assert _content_text(end).startswith("second-run\n")

        with pytest.raises(RequestError, match="no transcript for session"):
            await second.conn.load_session(cwd=str(tmp_path), session_id="0" * 32, mcp_servers=[])

    records = transcript_records(transcripts / f"{session}.jsonl")
    assert [r["type"] for r in records].count("tool_turn") == 2


MCP_TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"


def _processes_with_environment(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker.encode() in environ:
                found.append(int(entry))
    return found


async def test_the_editors_mcp_servers_are_started_for_the_session(tmp_path: Path) -> None:
    """`session/new` mcpServers: the session starts them (with their env) and stops them."""
    from acp.schema import EnvVariable, McpServerStdio

    marker = f"acp-mcp-{uuid.uuid4().hex[:12]}"
    server = McpServerStdio(
        name="probe",
        command=sys.executable,
        args=[str(MCP_TEST_SERVER)],
        env=[EnvVariable(name="TOOLBATCH_ACP_MARKER", value=marker)],
    )
    async with running_agent("--auto-approve", tmp_path=tmp_path) as agent:
        await agent.new_session(tmp_path, mcp_servers=[server])
        assert _processes_with_environment(f"TOOLBATCH_ACP_MARKER={marker}")
    for _ in range(300):  # the server's group is stopped as the session closes
        if not _processes_with_environment(f"TOOLBATCH_ACP_MARKER={marker}"):
            break
        await anyio.sleep(0.05)
    else:
        raise AssertionError("the session's MCP server outlived the agent")
