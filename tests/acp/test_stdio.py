"""``toolbatch acp`` on any stdin and stdout: pipes, regular files and ``/dev/null``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ._support import agent_command

TIMEOUT_S = 60


def request(request_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def script(cwd: Path) -> bytes:
    """Requests read ahead of their answers: initialize, a session, a prompt to a bad id."""
    lines = [
        request(1, "initialize", {"protocolVersion": 1}),
        request(2, "session/new", {"cwd": str(cwd), "mcpServers": []}),
        request(3, "session/prompt", {"sessionId": "nope", "prompt": []}),
    ]
    return ("\n".join(lines) + "\n").encode()


def answers(output: bytes) -> dict[int, dict[str, Any]]:
    messages = [json.loads(line) for line in output.split(b"\n") if line]
    return {message["id"]: message for message in messages}


@pytest.mark.parametrize("stdout_kind", ["file", "pipe", "devnull"])
def test_a_script_file_of_requests_is_answered_to_any_output(
    tmp_path: Path, stdout_kind: str
) -> None:
    """stdin a regular file: every request is answered (to a file, a pipe or /dev/null)."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(script(tmp_path))
    replies = tmp_path / "replies.jsonl"
    with (
        requests.open("rb") as file_in,
        replies.open("wb") as file_out,
        open(os.devnull, "wb") as devnull,
    ):
        stdout: Any = {"file": file_out, "pipe": subprocess.PIPE, "devnull": devnull}[stdout_kind]
        done = subprocess.run(
            agent_command(),
            stdin=file_in,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT_S,
            check=False,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    if stdout_kind == "devnull":
        return
    by_id = answers(done.stdout if stdout_kind == "pipe" else replies.read_bytes())
    assert set(by_id) == {1, 2, 3}
    assert by_id[1]["result"]["agentInfo"]["name"] == "toolbatch"
    assert len(by_id[2]["result"]["sessionId"]) == 32
    assert "unknown session 'nope'" in by_id[3]["error"]["message"]


def test_a_piped_client_may_have_its_answers_written_to_a_file(tmp_path: Path) -> None:
    """stdin a pipe (a live client), stdout a regular file: answers land in the file."""
    replies = tmp_path / "replies.jsonl"
    with replies.open("wb") as file_out:
        proc = subprocess.Popen(
            agent_command(), stdin=subprocess.PIPE, stdout=file_out, stderr=subprocess.PIPE
        )
        assert proc.stdin is not None
        proc.stdin.write(script(tmp_path))
        proc.stdin.flush()
        deadline = time.monotonic() + TIMEOUT_S
        # A pipe's end means the client left (its prompts are cancelled): wait for the
        # answers before closing it. The file offers nothing to wait on, so it is polled.
        while len(answers(replies.read_bytes())) < 3:
            assert time.monotonic() < deadline, replies.read_text()
            time.sleep(0.02)
        _, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, stderr.decode()
    assert "Traceback" not in stderr.decode()
    assert set(answers(replies.read_bytes())) == {1, 2, 3}


def test_an_empty_input_from_dev_null_ends_quietly(tmp_path: Path) -> None:
    """stdin and stdout on /dev/null: nothing to do, exit 0, no traceback."""
    with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
        done = subprocess.run(
            agent_command(),
            stdin=null_in,
            stdout=null_out,
            stderr=subprocess.PIPE,
            timeout=TIMEOUT_S,
            check=False,
            cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()
