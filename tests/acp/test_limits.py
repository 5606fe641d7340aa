"""``toolbatch acp`` under hostile input: JSON nested too deep (issue 14, item 1), huge
commands, many sessions and a client that never reads (issue 29, items 6 and 13)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

from toolbatch._core._json_limits import MAX_JSON_DEPTH

from ._support import agent_command, running_agent
from .test_stdio import TIMEOUT_S, answers, request

DEEP = "[" * 1_000 + "]" * 1_000


def test_a_deep_request_gets_an_error_and_the_agent_answers_the_rest(tmp_path: Path) -> None:
    """1,000 levels: -32600 under its id (a notification is dropped), no traceback, exit 0."""
    lines = [
        request(1, "initialize", {"protocolVersion": 1}),
        '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":' + DEEP + "}}",
        '{"jsonrpc":"2.0","method":"session/cancel","params":{"x":' + DEEP + "}}",
        DEEP,
        request(3, "session/new", {"cwd": str(tmp_path), "mcpServers": []}),
    ]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            agent_command(),
            stdin=stdin,
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "RecursionError" not in stderr
    by_id = answers(done.stdout)
    assert set(by_id) == {1, 2, 3}
    assert by_id[2]["error"]["code"] == -32600
    assert f"deeper than {MAX_JSON_DEPTH} levels" in by_id[2]["error"]["message"]
    assert len(by_id[3]["result"]["sessionId"]) == 32
    assert json.dumps(by_id[1]["result"])


async def test_the_model_trace_and_the_transcript_are_created_0600(tmp_path: Path) -> None:
    """Both hold tool output (an environment secret among it): owner-only from the start."""
    trace, transcripts = tmp_path / "trace.jsonl", tmp_path / "transcripts"
    flags = ["--auto-approve", "--trace-model", str(trace), "--transcript-dir", str(transcripts)]
    async with running_agent(*flags, tmp_path=tmp_path) as agent:
        session = await agent.new_session(tmp_path)
        assert await agent.prompt(session, "$ echo secret-output") == "end_turn"
    assert "secret-output" in trace.read_text()
    [transcript] = transcripts.iterdir()
    for path in (trace, transcript):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


class _Agent:
    """``toolbatch acp`` as a subprocess spoken to line by line (issue 29)."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.log = tmp_path / "acp.log"
        with self.log.open("wb") as log_file:
            self.proc = subprocess.Popen(
                agent_command(*flags),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                cwd=tmp_path,
            )
        self._next_id = 0

    def send(self, method: str, params: dict[str, object]) -> int:
        assert self.proc.stdin is not None
        self._next_id += 1
        self.proc.stdin.write((request(self._next_id, method, params) + "\n").encode())
        self.proc.stdin.flush()
        return self._next_id

    def answer(self, request_id: int) -> dict[str, object]:
        """The answer to ``request_id`` (other messages before it are skipped)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message
        raise AssertionError(f"no answer to {request_id}: {self.log.read_text()}")

    def threads(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("Threads:"))[8:])

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()


def test_sessions_past_the_cap_release_idle_ones_and_threads_stay_bounded(
    tmp_path: Path,
) -> None:
    """Issue 29, item 13: 4,000 session/new made 4,001 threads. 200 here with the default cap
    of 32: each is answered, the least recently used idle session is released (a prompt to
    it is "unknown session"), and the thread count stays flat."""
    agent = _Agent(tmp_path)
    try:
        agent.answer(agent.send("initialize", {"protocolVersion": 1}))
        opened = []
        for _ in range(200):
            answer = agent.answer(
                agent.send("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            )
            opened.append(answer["result"]["sessionId"])  # type: ignore[index]
        assert agent.threads() < 120
        gone = agent.answer(agent.send("session/prompt", {"sessionId": opened[0], "prompt": []}))
        assert "unknown session" in gone["error"]["message"]  # type: ignore[index]
        kept = agent.send("session/prompt", {"sessionId": opened[-1], "prompt": []})
        assert "result" in agent.answer(kept)
        assert agent.close() == 0
        assert agent.log.read_text().count("acp.session_released") == 200 - 32
    finally:
        agent.kill()


def test_a_session_past_the_cap_when_all_are_busy_is_refused_with_the_fix(
    tmp_path: Path,
) -> None:
    """--max-sessions 1 and its session running a prompt: session/new is -32600 naming the
    flag; once the prompt ends a new session opens."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    agent = _Agent(tmp_path, "--max-sessions", "1", "--auto-approve")
    try:
        agent.answer(agent.send("initialize", {"protocolVersion": 1}))
        answer = agent.answer(agent.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        session = answer["result"]["sessionId"]  # type: ignore[index]
        text = {"type": "text", "text": f"$ cat {gate}"}
        prompt = agent.send("session/prompt", {"sessionId": session, "prompt": [text]})
        assert agent.proc.stdout is not None
        for line in agent.proc.stdout:  # until the command is running
            update = json.loads(line).get("params", {}).get("update", {})
            if update.get("status") == "in_progress":
                break
        refused = agent.answer(agent.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        assert refused["error"]["code"] == -32600  # type: ignore[index]
        assert "--max-sessions 1" in refused["error"]["message"]  # type: ignore[index]
        gate.write_text("go\n")
        assert "result" in agent.answer(prompt)
        assert "result" in agent.answer(
            agent.send("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        )
        assert agent.close() == 0
    finally:
        agent.kill()


def test_a_3_mb_command_makes_bounded_frames(tmp_path: Path) -> None:
    """Issue 29, item 13: the tool_call update and the permission request of a 3 MB command
    carry its arguments head and tail within the display bound, not 3 MB each."""
    agent = _Agent(tmp_path)
    try:
        agent.answer(agent.send("initialize", {"protocolVersion": 1}))
        answer = agent.answer(agent.send("session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        session = answer["result"]["sessionId"]  # type: ignore[index]
        command = "echo " + "x" * 3_000_000
        text = {"type": "text", "text": f"$ {command}"}
        agent.send("session/prompt", {"sessionId": session, "prompt": [text]})
        assert agent.proc.stdout is not None
        sizes: dict[str, int] = {}
        for line in agent.proc.stdout:
            message = json.loads(line)
            if message.get("method") == "session/request_permission":
                sizes["permission"] = len(line)
                break
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "tool_call":
                sizes["tool_call"] = len(line)
                assert "[... truncated" in json.dumps(update["rawInput"])
        assert set(sizes) == {"tool_call", "permission"}
        assert max(sizes.values()) < 100_000, sizes
    finally:
        agent.kill()


def _wait_for(path: Path, text: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while text not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in the log"
        time.sleep(0.05)  # a log file has no readiness event to wait on


def test_a_client_that_never_reads_30000_answers_stops_being_read(tmp_path: Path) -> None:
    """Issue 29, item 6, for ACP: 30,000 requests and nothing read. The agent stops reading
    (the sender blocks), stays under 300 MB, and answers all of them once the client reads."""
    total = 30_000
    agent = _Agent(tmp_path)
    sent: list[int] = []

    def send_all() -> None:
        assert agent.proc.stdin is not None
        line = request(0, "initialize", {"protocolVersion": 1})
        for number in range(1, total + 1):
            agent.proc.stdin.write(line.replace('"id": 0', f'"id": {number}').encode() + b"\n")
            sent.append(number)
        agent.proc.stdin.close()

    sender = threading.Thread(target=send_all, daemon=True)
    try:
        sender.start()
        _wait_for(agent.log, "acp.backpressure")
        rss = int(
            next(
                line
                for line in Path(f"/proc/{agent.proc.pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            ).split()[1]
        )
        assert len(sent) < total
        assert rss < 300 * 1024, f"{rss // 1024} MiB while the client does not read"
        assert agent.proc.stdout is not None
        answered = {json.loads(line)["id"] for line in agent.proc.stdout}
        sender.join(timeout=TIMEOUT_S)
        assert answered == set(range(1, total + 1))
        assert agent.proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        agent.kill()
