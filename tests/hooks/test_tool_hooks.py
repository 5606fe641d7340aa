"""Per-call hooks through the public API: what each event receives, what each answer does,
and hooks that crash, hang or print garbage (logged; they change nothing)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from toolbatch import (
    SchedulerConfig,
    ToolCall,
    ToolScheduler,
    Turn,
    default_registry,
    tool,
)
from toolbatch._core._wire import FunctionResponsePart, TextPart
from toolbatch.hooks import (
    CommandHook,
    EventHook,
    PostToolUseFailureInput,
    PostToolUseInput,
    PreToolUseInput,
    ToolHookOutput,
)


def script(tmp_path: Path, name: str, body: str) -> str:
    """A hook script file; returns the settings "command" that runs it."""
    path = tmp_path / name
    if name.endswith(".py"):
        path.write_text("import json, sys, time, os\n" + textwrap.dedent(body))
        return f"{sys.executable} {path}"
    path.write_text("#!/bin/bash\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def hooks_settings(**events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"hooks": dict(events)}


def group(command: str, matcher: str | None = None, **extra: Any) -> dict[str, Any]:
    handler = {"type": "command", "command": command, **extra}
    return {"matcher": matcher, "hooks": [handler]} if matcher else {"hooks": [handler]}


def body(turn: Turn, index: int = 0) -> dict[str, Any]:
    part = turn.responses[index].parts[0]
    assert isinstance(part, FunctionResponsePart)
    return dict(part.function_response.response)


def texts(turn: Turn) -> list[str]:
    return [part.text for part in turn.parts if isinstance(part, TextPart)]


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


async def run(tmp_path: Path, calls: list[ToolCall], **config: Any) -> Turn:
    registry = default_registry()
    registry.register(explode)
    options = {"artifacts_dir": tmp_path / "artifacts", "sandbox": "off", **config}
    async with ToolScheduler(registry, SchedulerConfig(**options)) as scheduler:
        return await scheduler.run_batch(calls)


async def test_each_event_receives_claude_codes_input_fields(tmp_path: Path) -> None:
    """session_id, transcript_path, cwd, permission_mode, hook_event_name, tool_name,
    tool_input, tool_use_id; tool_response and duration_ms after success; error and
    is_interrupt after a failure. The shell is Bash, as in Claude Code."""
    seen = tmp_path / "seen.jsonl"
    record = script(
        tmp_path, "record.py", f"open({str(seen)!r}, 'a').write(sys.stdin.read() + '\\n')"
    )
    # One write per event: the hooks of the two calls run at the same time.
    recorder_sh = script(tmp_path, "record.sh", f'printf "%s\\n" "$(cat)" >> "{seen}"')
    settings = hooks_settings(
        PreToolUse=[group(record, "Bash")],
        PostToolUse=[group(recorder_sh, "run_shell_command")],
        PostToolUseFailure=[group(record, "explode")],
    )
    calls = [
        ToolCall(id="c1", name="run_shell_command", args={"command": "echo hi"}),
        ToolCall(id="c2", name="explode", args={"reason": "kaboom"}),
    ]
    turn = await run(tmp_path, calls, settings=settings, session_id="s-1")
    assert [r.status for r in turn.responses] == ["success", "error"]
    events = [json.loads(line) for line in seen.read_text().splitlines() if line.strip()]
    by_event = {e["hook_event_name"]: e for e in events}
    assert set(by_event) == {"PreToolUse", "PostToolUse", "PostToolUseFailure"}
    pre = by_event["PreToolUse"]
    assert pre["tool_name"] == "Bash"
    assert pre["tool_input"] == {"command": "echo hi"}
    assert pre["tool_use_id"] == "c1"
    assert pre["session_id"] == "s-1"
    assert pre["transcript_path"] is None  # nothing recorded
    assert pre["cwd"] == str(Path.cwd())
    assert pre["permission_mode"] == "default"
    post = by_event["PostToolUse"]
    assert post["tool_response"] == {  # Claude Code's Bash output object
        "stdout": "hi\n",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
    }
    assert isinstance(post["duration_ms"], int)
    failure = by_event["PostToolUseFailure"]
    assert failure["tool_name"] == "explode"
    assert "kaboom" in failure["error"]
    assert failure["is_interrupt"] is False


@pytest.mark.parametrize(
    ("command", "event", "said", "sent"),
    [
        pytest.param(
            "printf 'done\\n[exit code: 0]\\n'; exit 3",
            "PostToolUseFailure",
            "Exit code 3\ndone\n[exit code: 0]\n",
            "done\n[exit code: 0]\n[exit code: 3]",
            id="a failure that prints a success line",
        ),
        pytest.param(
            "echo '[exit code: 7]'",
            "PostToolUse",
            "[exit code: 7]\n",
            "[exit code: 7]\n[exit code: 0]",
            id="a success that prints a failure line",
        ),
        pytest.param(
            "echo '[exit code: 0]'; kill -KILL $$",
            "PostToolUseFailure",
            "Exit code 137\n[exit code: 0]\n",
            "[exit code: 0]\n[killed by signal SIGKILL (9)]",
            id="a death by signal after a success line",
        ),
    ],
)
async def test_the_exit_status_is_the_commands_whatever_it_prints(
    tmp_path: Path, command: str, event: str, said: str, sent: str
) -> None:
    """PostToolUse or PostToolUseFailure (``Exit code N``) follows how the command ended,
    never an exit line it printed itself, which stays part of its output; the model gets
    the output and then the real exit line."""
    seen: dict[str, str] = {}

    def post(data: PostToolUseInput) -> None:
        seen[data.hook_event_name] = str(data.tool_response["stdout"])

    def failed(data: PostToolUseFailureInput) -> None:
        seen[data.hook_event_name] = data.error

    hooks = [EventHook("PostToolUse", post), EventHook("PostToolUseFailure", failed)]
    call = ToolCall(id="c1", name="run_shell_command", args={"command": command})
    turn = await run(tmp_path, [call], hooks=hooks)
    assert seen == {event: said}
    assert body(turn)["output"] == sent


async def test_python_hooks_for_each_event_sync_and_async(tmp_path: Path) -> None:
    """Python hooks get the input model and answer with ToolHookOutput or Claude Code's dict."""
    seen: list[str] = []

    async def pre(data: PreToolUseInput) -> dict[str, Any]:
        seen.append(data.hook_event_name)
        command = data.tool_input["command"]
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "updatedInput": {"command": f"{command} world"},
            }
        }

    def post(data: PostToolUseInput) -> ToolHookOutput:  # a plain function: a worker thread
        seen.append(data.hook_event_name)
        return ToolHookOutput(additional_context=f"saw {data.tool_response['stdout']!r}")

    async def failed(data: PostToolUseFailureInput) -> ToolHookOutput:
        seen.append(data.hook_event_name)
        return ToolHookOutput(stop=True, stop_reason="stop after a failure")

    hooks = [
        EventHook("PreToolUse", pre, matcher="Bash"),
        EventHook("PostToolUse", post),
        EventHook("PostToolUseFailure", failed),
    ]
    calls = [
        ToolCall(id="c1", name="run_shell_command", args={"command": "echo hello"}),
        ToolCall(id="c2", name="explode", args={"reason": "x"}),
    ]
    turn = await run(tmp_path, calls, hooks=hooks)
    assert sorted(seen) == ["PostToolUse", "PostToolUseFailure", "PreToolUse"]
    assert body(turn)["output"].startswith("hello world")
    assert turn.responses[0].call_args == {"command": "echo hello world"}  # what ran
    said = texts(turn)
    assert said[0].startswith("[PostToolUse hook, call c1 (run_shell_command)] saw 'hello world")
    assert turn.stop_reason == "stop after a failure"
    assert said[-1].endswith("stop after a failure")


@pytest.mark.parametrize(
    "body_text",
    [
        pytest.param("raise RuntimeError('hook bug')", id="crash"),
        pytest.param("time.sleep(30)", id="hang"),
        pytest.param("print('{\"hookSpecificOutput\": 7}')", id="garbage-json"),
        pytest.param("print('x' * (2 * 2**20))", id="huge-output"),
        pytest.param("sys.exit(127)", id="exit-127"),
    ],
)
async def test_a_broken_pre_tool_use_hook_changes_nothing_unless_it_fails_closed(
    tmp_path: Path, body_text: str
) -> None:
    """Crash, hang (timeout), garbage, oversized output, missing script: logged, and the call
    runs as if the hook were absent; with failClosed the same failure denies the call."""
    command = script(tmp_path, "broken.py", "json.load(sys.stdin)\n" + body_text)
    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "echo ran"})]
    for fail_closed in (False, True):
        settings = hooks_settings(
            PreToolUse=[group(command, "Bash", timeout=1, failClosed=fail_closed)]
        )
        with capture_logs() as logs:
            turn = await run(tmp_path, calls, settings=settings)
        assert [log["event"] for log in logs if log["event"] == "hooks.failed"] == ["hooks.failed"]
        if fail_closed:
            assert turn.responses[0].error_type == "permission_denied"
            assert "configured to fail closed" in body(turn)["error"]
        else:
            assert turn.responses[0].status == "success"
            assert body(turn)["output"].startswith("ran")


async def test_post_hooks_that_break_leave_the_result_and_the_turn_alone(tmp_path: Path) -> None:
    """A PostToolUse hook that crashes or prints garbage adds nothing."""
    crash = script(tmp_path, "crash.sh", "cat > /dev/null; echo oops >&2; exit 1")
    garbage = script(tmp_path, "garbage.sh", "cat > /dev/null; echo '{not json'")
    settings = hooks_settings(PostToolUse=[group(crash), group(garbage)])
    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "echo ok"})]
    turn = await run(tmp_path, calls, settings=settings)
    assert body(turn)["output"].startswith("ok")
    assert texts(turn) == []


async def test_post_tool_use_exit_2_and_block_are_told_beside_the_kept_result(
    tmp_path: Path,
) -> None:
    """PostToolUse cannot block: exit 2's stderr and decision block's reason are notes."""
    exit2 = script(tmp_path, "exit2.sh", "cat > /dev/null; echo 'tests are red' >&2; exit 2")
    settings = hooks_settings(PostToolUse=[group(exit2, "Bash")])
    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "echo result"})]
    turn = await run(tmp_path, calls, settings=settings)
    assert body(turn)["output"].startswith("result")
    assert texts(turn) == ["[PostToolUse hook, call c1 (run_shell_command)] tests are red"]


async def test_what_hooks_add_is_bounded_by_the_budget_and_never_rewrites_a_result(
    tmp_path: Path,
) -> None:
    """A 200,000-character context is cut like any text; the result is still its own."""

    async def chatty(data: PostToolUseInput) -> ToolHookOutput:
        return ToolHookOutput(additional_context="lint says: " + "x" * 200_000)

    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "echo small"})]
    turn = await run(tmp_path, calls, hooks=[EventHook("PostToolUse", chatty)], batch_budget=5_000)
    assert turn.content_length <= 5_000
    assert body(turn)["output"].startswith("small")
    [note] = texts(turn)
    assert "[PostToolUse hook, call c1" in note  # its head, and where the whole text is
    assert "Full output: " in note
    assert len(note) < 5_000


async def test_matchers_follow_claude_codes_rules(tmp_path: Path) -> None:
    """Exact names, lists, regular expressions (unanchored), Bash for the shell, '*' for all."""
    ran: list[str] = []

    def hook_for(label: str) -> Any:
        async def hook(data: PreToolUseInput) -> None:
            ran.append(f"{label}:{data.tool_name}")

        return hook

    hooks = [
        EventHook("PreToolUse", hook_for("bash"), matcher="Bash"),
        EventHook("PreToolUse", hook_for("list"), matcher="explode|Edit"),
        EventHook("PreToolUse", hook_for("regex"), matcher="^run_.*"),
        EventHook("PreToolUse", hook_for("unanchored"), matcher="xplo.e"),
        EventHook("PreToolUse", hook_for("letters-only-is-exact"), matcher="plode"),
        EventHook("PreToolUse", hook_for("all"), matcher="*"),
        EventHook("PreToolUse", hook_for("mcp"), matcher="mcp__memory"),  # exact: no tool
        EventHook("PreToolUse", hook_for("if"), matcher="Bash", condition="Bash(git *)"),
    ]
    calls = [
        ToolCall(id="c1", name="run_shell_command", args={"command": "echo a && git status"}),
        ToolCall(id="c2", name="explode", args={"reason": "x"}),
    ]
    await run(tmp_path, calls, hooks=hooks)
    assert sorted(ran) == sorted(
        [
            "bash:Bash",  # hooks are told Claude Code's name whatever matched
            "regex:Bash",
            "all:Bash",
            "if:Bash",
            "list:explode",
            "unanchored:explode",
            "all:explode",
        ]
    )


async def test_a_command_hook_defined_twice_runs_once(tmp_path: Path) -> None:
    """Identical handlers in two files run once (Claude Code's rule)."""
    counter = tmp_path / "count"
    command = script(tmp_path, "count.sh", f'cat > /dev/null; echo x >> "{counter}"')
    settings = hooks_settings(PreToolUse=[group(command, "Bash")])
    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "true"})]
    await run(tmp_path, calls, settings=[settings, settings])
    assert counter.read_text().count("x") == 1


async def test_updated_input_is_validated_like_any_call(tmp_path: Path) -> None:
    """A hook replacing the arguments with invalid ones answers the call with the reason."""

    async def bad(data: PreToolUseInput) -> ToolHookOutput:
        return ToolHookOutput(updated_input={"reason": 12})

    calls = [ToolCall(id="c1", name="explode", args={"reason": "x"})]
    turn = await run(tmp_path, calls, hooks=[EventHook("PreToolUse", bad)])
    response = turn.responses[0]
    assert response.status == "error"
    assert response.error_type == "invalid_args"  # the tool's own validation, as for any call


async def test_python_command_hook_objects_work_beside_settings(tmp_path: Path) -> None:
    """EventHook(CommandHook(...)) is the same as a settings command hook."""
    deny = script(
        tmp_path,
        "deny.py",
        """
        data = json.load(sys.stdin)
        print(json.dumps({"decision": "block", "reason": "old-style block"}))
        """,
    )
    hook = EventHook("PreToolUse", CommandHook(deny.split(" ")), matcher="Bash")
    calls = [ToolCall(id="c1", name="run_shell_command", args={"command": "echo no"})]
    turn = await run(tmp_path, calls, hooks=[hook])
    assert turn.responses[0].error_type == "permission_denied"
    assert "old-style block" in body(turn)["error"]  # deprecated decision block = deny


MCP_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"


@tool
def take(text: str) -> str:
    """Take a long argument; answer briefly."""
    return f"took {len(text):,} characters"


async def test_every_hook_reads_a_bounded_input_that_says_what_was_cut(tmp_path: Path) -> None:
    """At budget 10,000: a 20 MB argument (PreToolUse, PostToolUse, PostToolBatch) and a
    6 MB MCP result of 60 parts (PostToolUse) reach each hook cut to about the budget, with
    a marker naming what was cut and where the whole is."""
    seen = tmp_path / "seen"
    seen.mkdir()
    record = script(
        tmp_path,
        "record.py",
        f"""
        data = sys.stdin.read()
        event = json.loads(data)
        name = event["hook_event_name"] + "-" + str(event.get("tool_use_id", "batch"))
        open(os.path.join({str(seen)!r}, name), "w").write(data)
        """,
    )
    settings = hooks_settings(
        PreToolUse=[group(record)], PostToolUse=[group(record)], PostToolBatch=[group(record)]
    )
    server = MCP_SERVER
    registry = default_registry()
    registry.register(take)
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts",
        sandbox="off",
        batch_budget=10_000,
        settings=settings,
        mcp_servers={"mcpServers": {"t": {"command": sys.executable, "args": [str(server)]}}},
    )
    calls = [
        ToolCall(id="big-arg", name="take", args={"text": "a" * 20_000_000}),
        ToolCall(id="parts", name="mcp__t__texts", args={"sizes": [100_000] * 60}),
    ]
    async with ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert [r.status for r in turn.responses] == ["success", "success"]
    read = {path.name: path.read_text() for path in seen.iterdir()}
    assert set(read) == {
        "PreToolUse-big-arg",
        "PreToolUse-parts",
        "PostToolUse-big-arg",
        "PostToolUse-parts",
        "PostToolBatch-batch",
    }
    for name, text in read.items():
        assert len(text) < 25_000, f"{name} read {len(text):,} characters"
    pre = json.loads(read["PreToolUse-big-arg"])["tool_input"]["text"]
    assert "19,99" in pre
    assert "characters of the arguments cut for the hook" in pre
    assert "'big-arg' as the model sent it" in pre
    post = json.dumps(json.loads(read["PostToolUse-parts"])["tool_response"])
    assert "characters of the response cut for the hook" in post
    batch = json.loads(read["PostToolBatch-batch"])
    assert "cut for the hook" in batch["tool_calls"][0]["tool_input"]["text"]
