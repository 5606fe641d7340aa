"""``toolbatch run`` shows progress while the batch runs, and a hung MCP server delays no
unrelated call: read from the real command's stdout and stderr, line by line, as they come."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.cli._support import ECHO_MCP_SERVER, TOOLBATCH

MUTE_SERVER = {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]}
"""Starts and never answers ``initialize``."""


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


class Timed:
    """A running ``toolbatch`` whose stdout and stderr lines are kept with their arrival
    time (seconds since the process was spawned)."""

    def __init__(self, *args: str, batch: list[dict[str, Any]], cwd: Path) -> None:
        path = cwd / "batch.json"
        path.write_text(json.dumps(batch))
        self.spawned = time.monotonic()
        self.proc = subprocess.Popen(
            [*TOOLBATCH, "run", *args, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self.stdout: list[tuple[float, str]] = []
        self.stderr: list[tuple[float, str]] = []
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout)),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr)),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[bytes], into: list[tuple[float, str]]) -> None:
        for line in stream:
            into.append((time.monotonic() - self.spawned, line.decode()))

    def wait(self, timeout: float = 90) -> float:
        """Wait for the end; the seconds it took."""
        self.proc.wait(timeout=timeout)
        took = time.monotonic() - self.spawned
        for reader in self._readers:
            reader.join(timeout=timeout)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return took

    def events(self) -> list[tuple[float, dict[str, Any]]]:
        return [(at, json.loads(line)) for at, line in self.stdout]

    def errors(self) -> str:
        return "".join(line for _, line in self.stderr)


def progress_of(
    events: list[tuple[float, dict[str, Any]]], call_id: str, status: str
) -> Iterator[tuple[float, dict[str, Any]]]:
    for at, event in events:
        if (
            event["type"] == "tool_progress"
            and event["tool_use_id"] == call_id
            and event["status"] == status
        ):
            yield at, event


def test_stream_json_shows_each_call_start_and_end_as_it_happens(tmp_path: Path) -> None:
    """init and the calls come at once, each call's start and end as they happen; the
    finalized tool results and the result only after the turn is complete."""
    batch = [shell("slow", "echo one; sleep 2; echo two"), shell("quick", "echo quick")]
    run = Timed("--output-format", "stream-json", batch=batch, cwd=tmp_path)
    run.wait()
    assert run.proc.returncode == 0, run.errors()
    events = run.events()
    kinds = [
        event["subtype"] if event["type"] == "system" else event["type"] for _, event in events
    ]
    assert kinds[0] == "init"
    assert kinds[-1] == "result"
    (slow_started_at, slow_started), *_ = progress_of(events, "slow", "started")
    (quick_done_at, quick_done), *_ = progress_of(events, "quick", "finished")
    (slow_done_at, slow_done), *_ = progress_of(events, "slow", "finished")
    init_at = events[0][0]
    # Live: the init, the slow call's start and the quick call's end arrive while the
    # slow call still sleeps, not all at once at the end.
    assert slow_done_at - init_at > 1.5
    assert slow_done_at - slow_started_at > 1.5
    assert slow_done_at - quick_done_at > 1.5
    assert slow_started["elapsed_time_seconds"] == 0
    assert slow_started["tool_name"] == "run_shell_command"
    assert quick_done["output_bytes"] == len("quick\n")
    assert quick_done["is_error"] is False
    assert slow_done["elapsed_time_seconds"] >= 2
    assert slow_done["output_bytes"] == len("one\ntwo\n")
    # A running event in between says how much output there is so far.
    running = [event for _, event in progress_of(events, "slow", "running")]
    assert running
    assert running[0]["output_bytes"] == len("one\n")
    # The model-facing results come once the turn is complete (the headless rule).
    first_result = kinds.index("user")
    assert all(kind != "tool_progress" for kind in kinds[first_result:])
    parts = json.loads(events[-1][1]["result"])
    outputs = {p["functionResponse"]["id"]: p["functionResponse"]["response"] for p in parts}
    assert outputs["slow"]["output"] == "one\ntwo\n[exit code: 0]"


def test_json_and_dual_output_carry_no_progress_events(tmp_path: Path) -> None:
    """Progress is live only: the json document and the sidecar keep their events."""
    sidecar = tmp_path / "dual.jsonl"
    run = Timed(
        "--output-format",
        "json",
        "--dual-output",
        str(sidecar),
        batch=[shell("a", "echo a")],
        cwd=tmp_path,
    )
    run.wait()
    assert run.proc.returncode == 0, run.errors()
    document = json.loads("".join(line for _, line in run.stdout))
    assert [event["type"] for event in document] == ["system", "assistant", "user", "result"]
    sidecar_types = {json.loads(line)["type"] for line in sidecar.read_text().splitlines()}
    assert "tool_progress" not in sidecar_types


def test_verbose_streams_output_lines_and_info_logs_each_call(tmp_path: Path) -> None:
    """--verbose: each output line on stderr as it comes, prefixed with the call id;
    --log-level info: each call's start and end as they happen."""
    batch = [shell("slow", "echo one; sleep 2; echo two")]
    run = Timed("--verbose", "--log-level", "info", batch=batch, cwd=tmp_path)
    run.wait()
    assert run.proc.returncode == 0, run.errors()
    lines = {line.rstrip("\n"): at for at, line in run.stderr}
    assert lines["[slow] two"] - lines["[slow] one"] > 1.5
    started = next(at for at, line in run.stderr if "run.call_started" in line)
    finished = next(at for at, line in run.stderr if "run.call_finished" in line)
    assert finished - started > 1.5
    assert "two\n[exit code: 0]" in "".join(line for _, line in run.stdout)


def mcp_config(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_a_hung_mcp_server_delays_no_unrelated_call(tmp_path: Path) -> None:
    """`echo hi` beside a server that never answers: the result comes at once, the server
    is reported pending in init and stopped at the end, long before its 30 s timeout."""
    config = mcp_config(tmp_path, {"mute": {**MUTE_SERVER, "startup_timeout_sec": 30}})
    run = Timed(
        "--output-format",
        "stream-json",
        "--mcp-config",
        str(config),
        batch=[shell("hi", "echo hi")],
        cwd=tmp_path,
    )
    took = run.wait()
    assert run.proc.returncode == 0, run.errors()
    events = run.events()
    init = events[0][1]
    assert init["mcp_servers"] == [{"name": "mute", "status": "pending"}]
    result_at, result = events[-1]
    assert result["type"] == "result"
    assert result_at - events[0][0] < 3  # the call did not wait for the server
    assert took < 15  # the server, still starting, was stopped at once at the end


def test_a_call_to_a_starting_server_waits_for_it_and_says_connecting(tmp_path: Path) -> None:
    """A call to a server still starting waits for that server only, reporting
    "connecting to <server>"; the shell call beside it does not wait."""
    echo_server = [ECHO_MCP_SERVER["command"], *ECHO_MCP_SERVER["args"]]
    late = {
        "command": "sh",
        "args": ["-c", f"sleep 2; exec {shlex.join(echo_server)}"],
    }
    config = mcp_config(tmp_path, {"late": late})
    batch = [
        {"id": "m", "name": "mcp__late__echo", "args": {"text": "hello"}},
        shell("hi", "echo hi"),
    ]
    run = Timed(
        "--output-format", "stream-json", "--mcp-config", str(config), batch=batch, cwd=tmp_path
    )
    run.wait()
    assert run.proc.returncode == 0, run.errors()
    events = run.events()
    (shell_done_at, _), *_ = progress_of(events, "hi", "finished")
    (mcp_done_at, mcp_done), *_ = progress_of(events, "m", "finished")
    assert mcp_done_at - shell_done_at > 1
    messages = [event.get("message") for _, event in progress_of(events, "m", "running")]
    assert "connecting to late" in messages
    assert mcp_done["is_error"] is False
    parts = json.loads(events[-1][1]["result"])
    assert parts[0]["functionResponse"]["response"]["output"] == "hello"


@pytest.mark.parametrize(
    ("entry", "flags", "said"),
    [
        pytest.param(
            {"startup_timeout_sec": 1},
            [],
            "within 1 s (set by 'startup_timeout_sec' in its entry)",
            id="entry",
        ),
        pytest.param(
            {},
            ["--mcp-startup-timeout", "1"],
            "within 1 s (set by --mcp-startup-timeout",
            id="flag",
        ),
    ],
)
def test_a_server_that_never_starts_is_named_with_what_set_its_timeout(
    tmp_path: Path, entry: dict[str, Any], flags: list[str], said: str
) -> None:
    """The call's error says which setting gave the limit and names the CLI flag."""
    config = mcp_config(tmp_path, {"mute": {**MUTE_SERVER, **entry}})
    batch = [{"id": "m", "name": "mcp__mute__echo", "args": {}}]
    run = Timed(
        "--output-format", "json", "--mcp-config", str(config), *flags, batch=batch, cwd=tmp_path
    )
    run.wait()
    assert run.proc.returncode == 0, run.errors()
    document = json.loads("".join(line for _, line in run.stdout))
    error = json.loads(document[-1]["result"])[0]["functionResponse"]["response"]["error"]
    assert "MCP server 'mute' did not finish start-up" in error
    assert said in error
    assert "--mcp-startup-timeout SECONDS" in error
    assert "startup_timeout_sec" in error
