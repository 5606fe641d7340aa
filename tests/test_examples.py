"""The examples run with one command each and do what their docstrings say.

The examples the README runs exactly as a reader would (`python examples/<name>.py`) are
checked in the output of that run (`tests/readme_runs.py`), not run a second time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.readme_runs import README_GROUP, ReadmeRuns
from toolbatch import load_session

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples' own temp directories (``scripted_loop.py`` keeps its workdir for the
    reader to look at) go under the test's ``tmp_path``, which pytest removes, not ``/tmp``."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def _run(
    script: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        check=False,
    )


def test_custom_producer_example(tmp_path: Path) -> None:
    """The custom producer persists its long listing once; the bad call is an error."""
    for i in range(40):
        (tmp_path / f"file{i:02d}.txt").write_text("x\n" * i)
    done = _run("custom_producer.py", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== list_tree [t1] success" in out
    assert "== count_lines [t2] success" in out
    assert "== count_lines [t3] error" in out
    assert "within budget 3000" in out
    listing_line = next(line for line in out.splitlines() if "artifacts" in line)
    [artifact] = json.loads(listing_line.split("artifacts: ")[1].replace("'", '"'))
    assert Path(artifact).read_text().count("\n") == 39


class _FakeChatCompletions(BaseHTTPRequestHandler):
    """Answers like the chat completions API: parallel tool calls, then a summary."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(length))
        body["_auth"] = self.headers.get("Authorization")
        body["_path"] = self.path
        type(self).requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "user":
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {
                            "name": "run_shell_command",
                            "arguments": json.dumps({"command": "seq 1 50000"}),
                        },
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {
                            "name": "word_count",
                            "arguments": json.dumps({"text": "one two three"}),
                        },
                    },
                ],
            }
        else:
            tools = [m for m in body["messages"] if m["role"] == "tool"]
            message = {
                "role": "assistant",
                "content": "summary: " + " | ".join(m["content"][-40:] for m in tools),
            }
        payload = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def chat_server() -> Iterator[str]:
    _FakeChatCompletions.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_loop_example_against_a_loopback_server(chat_server: str, tmp_path: Path) -> None:
    """The loop sends the registry's tools, runs parallel calls, and sends the finalized turn."""
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    done = _run(
        "openai_loop.py",
        "count things",
        "--resume",
        str(transcript),
        "--budget",
        "5000",
        env={"OPENAI_BASE_URL": chat_server, "OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "fake"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("summary: ")
    first, second = _FakeChatCompletions.requests
    assert first["_path"] == "/v1/chat/completions"
    assert first["_auth"] == "Bearer sk-test"
    assert first["model"] == "fake"
    assert first["parallel_tool_calls"] is True
    assert {t["function"]["name"] for t in first["tools"]} == {"run_shell_command", "word_count"}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]
    assert tool_messages[1]["content"] == "3"
    assert sum(len(m["content"]) for m in tool_messages) <= 5000
    assert "50000" in tool_messages[0]["content"]
    [turn] = [e for e in load_session(transcript) if e.type == "tool_turn"]
    recorded = {
        p.function_response.id: p.function_response.response.get("output")  # type: ignore[union-attr]
        for p in turn.parts
    }
    assert recorded["call_b"] == "3"
    assert isinstance(recorded["call_a"], str)
    assert recorded["call_a"] in tool_messages[0]["content"]


def test_openai_loop_example_without_a_model_name_explains_itself() -> None:
    """Missing OPENAI_MODEL: exit 2 and a message naming the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "openai_loop.py"), "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert "OPENAI_MODEL" in done.stderr


@README_GROUP
def test_scripted_loop_example_runs_real_tools_within_budget(readme_runs: ReadmeRuns) -> None:
    """Shell, MCP and a custom tool over three turns; each turn within 12,000 chars."""
    lines = readme_runs.command("python examples/scripted_loop.py").stdout.splitlines()
    turns = [line for line in lines if line.startswith("turn ")]
    assert len(turns) == 3
    for line in turns:
        used = int(line.split(", ")[1].split(" of ")[0].replace(",", ""))
        assert used <= 12_000
    assert any("mcp__demo__ticket" in line and "success" in line for line in lines)
    assert any("slugify" in line and "success" in line for line in lines)
    big_shell = next(line for line in lines if "run_shell_command" in line)
    artifact = Path(big_shell.split("artifact: ")[1])
    assert artifact.read_text().splitlines()[-1] == "200000"
    transcript = Path(lines[-1].removeprefix("transcript: "))
    tool_turns = [e for e in load_session(transcript) if e.type == "tool_turn"]
    assert len(tool_turns) == 3


@README_GROUP
def test_subagent_example_returns_the_childs_answer(readme_runs: ReadmeRuns) -> None:
    """The parent receives the child's final answer through its agent tool."""
    out = readme_runs.command("python examples/subagent.py").stdout
    assert "The sequence has 100000 lines" in out
    assert "'tool_calls': 2" in out


def _example_turn(transcript: Path) -> dict[str, Any]:
    [turn] = [e for e in load_session(transcript) if e.type == "tool_turn"]
    return {
        p.function_response.id: p.function_response.response.get("output")  # type: ignore[union-attr]
        for p in turn.parts
    }


RESPONSES_LINE = (
    "OPENAI_MODEL=gpt-5-mini python examples/openai_responses_loop.py "
    '"How many lines does seq 1 50000 print?"'
)
ANTHROPIC_LINE = (
    "ANTHROPIC_MODEL=claude-sonnet-4-5 python examples/anthropic_loop.py "
    '"How many lines does seq 1 50000 print?"'
)


def _transcript(stderr: str) -> Path:
    """The transcript a model loop example names at its end on stderr."""
    return Path(stderr.rsplit("transcript: ", 1)[1].strip().rstrip("]"))


# The two SDK loops are checked in the README's own run of them (its fake APIs answer the
# same two calls); the flags --resume and --budget are checked on openai_loop.py above.
@README_GROUP
def test_openai_responses_loop_example_against_a_loopback_server(
    readme_runs: ReadmeRuns,
) -> None:
    """The Responses loop sends function tools, runs both calls, answers each call_id once,
    and records what it sent."""
    run = readme_runs.command(RESPONSES_LINE)
    assert run.stdout.strip() == "answer: 2 results"
    requests = readme_runs.block_of(RESPONSES_LINE).requests["openai"]
    first, second = [r for r in requests if r.path == "/v1/responses"]
    assert first.headers["authorization"] == "Bearer sk-readme"
    assert first.body["model"] == "gpt-5-mini"
    assert {t["name"] for t in first.body["tools"]} == {"run_shell_command", "word_count"}
    outputs = [i for i in second.body["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_a", "call_b"]
    assert outputs[1]["output"] == "3"
    recorded = _example_turn(_transcript(run.stderr))
    assert recorded["call_b"] == "3"
    assert recorded["call_a"] in outputs[0]["output"]


@README_GROUP
def test_anthropic_loop_example_against_a_loopback_server(readme_runs: ReadmeRuns) -> None:
    """The Anthropic loop sends tools, then one user message of tool_result blocks in order,
    and records what it sent."""
    run = readme_runs.command(ANTHROPIC_LINE)
    assert run.stdout.strip() == "answer: 2 results"
    first, second = readme_runs.block_of(ANTHROPIC_LINE).requests["anthropic"]
    assert first.path == "/v1/messages"
    assert first.body["model"] == "claude-sonnet-4-5"
    assert first.body["system"].startswith("You are a careful coding agent")
    assert {t["name"] for t in first.body["tools"]} == {"run_shell_command", "word_count"}
    results = second.body["messages"][-1]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["call_a", "call_b"]
    texts = [b["content"][0]["text"] for b in results["content"]]
    assert texts[1] == "3"
    assert _example_turn(_transcript(run.stderr))["call_a"] in texts[0]


@pytest.mark.parametrize(
    ("script", "variable"),
    [
        pytest.param("openai_responses_loop.py", "OPENAI_MODEL", id="responses"),
        pytest.param("anthropic_loop.py", "ANTHROPIC_MODEL", id="anthropic"),
    ],
)
def test_the_sdk_examples_without_a_model_name_explain_themselves(
    script: str, variable: str
) -> None:
    """Missing model name: exit 2 and a message naming the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "hi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 2
    assert variable in done.stderr


@README_GROUP
@pytest.mark.parametrize(
    ("script", "first_line"),
    [
        pytest.param("langgraph_node.py", "The logs are long", id="langgraph"),
        pytest.param("pydantic_ai_toolset.py", "Two long listings", id="pydantic-ai"),
        pytest.param("openai_agents_tools.py", "Listings saved", id="openai-agents"),
        pytest.param("mini_swe_agent_env.py", "exit status: Submitted", id="mini-swe-agent"),
    ],
)
def test_framework_examples_send_a_bounded_batch(
    script: str, first_line: str, readme_runs: ReadmeRuns
) -> None:
    """Each framework example's three calls reach its fake model within the 6,000 budget."""
    out = readme_runs.command(f"python examples/{script}").stdout
    assert out.count("Tool output truncated.") == 2, out
    sent = next(line for line in out.splitlines() if "within budget 6,000" in line)
    assert int(sent.split()[0].replace(",", "")) <= 6_000
    assert first_line in out
