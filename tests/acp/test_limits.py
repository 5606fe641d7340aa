"""``toolbatch acp`` refuses JSON nested too deep for that request only (issue 14, item 1)."""

from __future__ import annotations

import json
import stat
import subprocess
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
