"""Command hooks: real executables speaking Claude Code's hook JSON over stdin/stdout."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from toolbatch import ToolCall, ToolCallResponse, ToolResult
from toolbatch.errors import ConfigError
from toolbatch.hooks import CommandHook, HookFailed, PostToolBatchInput, build_hook_input


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "hook.py"
    path.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


def _batch() -> PostToolBatchInput:
    call = ToolCall(id="c1", name="echo", args={"text": "hi"})
    response = ToolCallResponse.from_result(call, ToolResult(content="hi"))
    return build_hook_input([response], session_id="s1")


async def test_hook_receives_claude_code_shaped_input(tmp_path: Path) -> None:
    """stdin carries hook_event_name, tool_calls[].tool_name/tool_input/tool_use_id."""
    seen = tmp_path / "seen.json"
    argv = _script(
        tmp_path,
        f"""
        data = json.load(sys.stdin)
        open({str(seen)!r}, "w").write(json.dumps(data))
        """,
    )
    assert await CommandHook(argv)(_batch()) is None
    data = json.loads(seen.read_text())
    assert data["hook_event_name"] == "PostToolBatch"
    assert data["session_id"] == "s1"
    [call] = data["tool_calls"]
    assert call["tool_name"] == "echo"
    assert call["tool_input"] == {"text": "hi"}
    assert call["tool_use_id"] == "c1"
    assert call["tool_response"]["parts"] == [
        {"functionResponse": {"id": "c1", "name": "echo", "response": {"output": "hi"}}}
    ]
    assert "display" not in call["tool_response"]


async def test_additional_context_from_hook_specific_output(tmp_path: Path) -> None:
    """hookSpecificOutput.additionalContext becomes additional_context."""
    argv = _script(
        tmp_path,
        """
        json.load(sys.stdin)
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolBatch",
                                                 "additionalContext": "lint: 3 warnings"}}))
        """,
    )
    answer = await CommandHook(argv)(_batch())
    assert answer is not None
    assert answer.additional_context == "lint: 3 warnings"
    assert not answer.stop


async def test_decision_block_stops_with_reason(tmp_path: Path) -> None:
    """decision: block with a reason is a stop carrying that reason."""
    argv = _script(tmp_path, 'print(json.dumps({"decision": "block", "reason": "tests fail"}))')
    answer = await CommandHook(argv)(_batch())
    assert answer is not None
    assert answer.stop
    assert answer.stop_reason == "tests fail"


async def test_exit_code_2_blocks_with_stderr_as_reason(tmp_path: Path) -> None:
    """Exit code 2 blocks; stderr is the reason."""
    argv = _script(tmp_path, 'sys.stderr.write("no deploys on friday\\n"); sys.exit(2)')
    answer = await CommandHook(argv)(_batch())
    assert answer is not None
    assert answer.stop
    assert answer.stop_reason == "no deploys on friday"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            'print(json.dumps({"decision": "stop"}))', "must be 'block'", id="bad-decision"
        ),
        pytest.param('sys.stderr.write("boom"); sys.exit(1)', "exited with code 1", id="exit-1"),
        pytest.param("raise SystemExit(3)", "exited with code 3", id="exit-3"),
        pytest.param('print("[" * 100 + "]" * 100)', None, id="deep-array-is-plain-text"),
        pytest.param(
            """print("{" + '"a":{' * 40 + "}" * 41)""", "nested deeper than 32", id="deep-object"
        ),
        pytest.param(
            'sys.stdout.write("{" + " " * (2 * 2**20) + "}")', "more than 1,048,576", id="huge"
        ),
    ],
)
async def test_bad_answers_are_hook_failures(
    tmp_path: Path, body: str, message: str | None
) -> None:
    """Failing exits, answers off the schema, and stdout past the size or nesting limit raise
    HookFailed (the runner logs them; that hook changes nothing)."""
    if message is None:
        assert await CommandHook(_script(tmp_path, body))(_batch()) is None
        return
    with pytest.raises(HookFailed, match=message):
        await CommandHook(_script(tmp_path, body))(_batch())


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('print("this is not json")', id="plain-text"),
        pytest.param('print("[1, 2]")', id="json-array"),
        pytest.param('print("{not json")', id="invalid-json-after-brace"),
    ],
)
async def test_stdout_that_is_not_a_json_object_decides_nothing(tmp_path: Path, body: str) -> None:
    """Claude Code's rule: only stdout starting with '{' is JSON; the rest is a log line."""
    assert await CommandHook(_script(tmp_path, body))(_batch()) is None


async def test_an_error_exit_with_a_valid_json_answer_lets_the_json_decide(
    tmp_path: Path,
) -> None:
    """Any exit but 0 and 2 with a schema-valid answer: the JSON alone decides."""
    body = 'print(json.dumps({"decision": "block", "reason": "json says so"})); sys.exit(1)'
    answer = await CommandHook(_script(tmp_path, body))(_batch())
    assert answer is not None
    assert answer.stop_reason == "json says so"


async def test_missing_executable_is_a_hook_failure(tmp_path: Path) -> None:
    """A hook that cannot start is a HookFailed naming it."""
    with pytest.raises(HookFailed, match="could not start"):
        await CommandHook([str(tmp_path / "nope")])(_batch())


def _pids_with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


async def test_hanging_hook_times_out_and_leaves_no_process(tmp_path: Path) -> None:
    """A hook that hangs (with a background child) is killed, group and all."""
    marker = f"hang-marker-{os.getpid()}"
    argv = ["bash", "-c", f"(exec -a {marker}-child sleep 300) & exec -a {marker} sleep 300"]
    with pytest.raises(HookFailed, match=r"did not answer within 0\.5 s"):
        await CommandHook(argv, timeout=0.5)(_batch())
    assert _pids_with_marker(marker) == []


async def test_hook_gets_only_the_default_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's secrets are not passed on; the hook's own env and PATH are."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    out = tmp_path / "env.json"
    argv = _script(tmp_path, f"open({str(out)!r}, 'w').write(json.dumps(dict(os.environ)))")
    await CommandHook(argv, env={"HOOK_MODE": "strict"})(_batch())
    env = json.loads(out.read_text())
    assert "OPENAI_API_KEY" not in env
    assert env["HOOK_MODE"] == "strict"
    assert "PATH" in env


@pytest.mark.parametrize(
    ("argv", "timeout"),
    [
        pytest.param("echo hi", 1.0, id="string-argv"),
        pytest.param([], 1.0, id="empty-argv"),
        pytest.param(["x"], 0, id="zero-timeout"),
        pytest.param(["x"], "5", id="string-timeout"),
    ],
)
def test_bad_command_hook_config_is_rejected(argv: object, timeout: object) -> None:
    """A bad argv or timeout is a ConfigError naming the value."""
    with pytest.raises(ConfigError):
        CommandHook(argv, timeout=timeout)  # type: ignore[arg-type]


async def test_a_lone_surrogate_in_the_batch_does_not_skip_the_hook(tmp_path: Path) -> None:
    """A model can't bypass a blocking hook by putting a lone surrogate in its arguments."""
    call = ToolCall(id="c1", name="echo", args={"text": "cut \ud83d"})
    response = ToolCallResponse.from_result(call, ToolResult(content="out \udcff"))
    batch = build_hook_input([response])
    seen = tmp_path / "seen.json"
    argv = _script(
        tmp_path,
        f"""
        data = json.load(sys.stdin)
        open({str(seen)!r}, "w").write(json.dumps(data))
        sys.exit(2)
        """,
    )
    answer = await CommandHook(argv)(batch)
    assert answer is not None
    assert answer.stop
    data = json.loads(seen.read_text())
    assert data["tool_calls"][0]["tool_input"] == {"text": "cut \ud83d"}


async def test_hook_input_is_bounded_by_the_batch_budget(tmp_path: Path) -> None:
    """What a command hook reads is the bounded batch: about the budget plus a small constant
    per call, however large the tools' display and error values were."""
    from toolbatch import SchedulerConfig, ToolScheduler, default_registry, tool

    @tool
    def big(n: int) -> str:
        """Print n characters."""
        return "é" * n

    seen = tmp_path / "seen.json"
    argv = _script(
        tmp_path,
        f"""
        raw = sys.stdin.buffer.read()
        open({str(seen)!r}, "wb").write(raw)
        """,
    )
    registry = default_registry()
    registry.register(big)
    budget = 2_000
    config = SchedulerConfig(
        batch_budget=budget, hooks=[CommandHook(argv)], artifacts_dir=tmp_path / "artifacts"
    )
    calls = [ToolCall(id=f"c{i}", name="big", args={"n": 300_000}) for i in range(5)]
    async with ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert turn.content_length <= budget
    payload = seen.read_bytes().decode("utf-8")
    per_call_overhead = 400
    assert len(payload) <= budget + per_call_overhead * len(calls)
