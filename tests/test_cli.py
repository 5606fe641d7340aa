"""The ``toolbatch`` command line: run, demo and acp, as a user runs them."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.cli._support import (
    TOOLBATCH,
    invoke_toolbatch,
    processes_with,
    run_toolbatch,
    write_mcp_config,
)
from tests.transports.strategies import reference_payload_bytes
from toolbatch import load_session, parts_adapter
from toolbatch.cli._main import main
from toolbatch.transports import HEADLESS_MARKER, HEADLESS_TOOL_RESULT_JSON_BYTES

LIMIT = HEADLESS_TOOL_RESULT_JSON_BYTES
EMOJI = "\U0001f600"


def js_bytes(text: str) -> int:
    """UTF-8 bytes of ``JSON.stringify(text)``, quotes included (independent oracle)."""
    return reference_payload_bytes(text) + 2


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


def python_print(expression: str) -> str:
    """A shell command printing a Python expression (with a trailing newline)."""
    return f'{sys.executable} -c "import sys; sys.stdout.write({expression} + chr(10))"'


def events_by_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def tool_results(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    blocks = [event["message"]["content"][0] for event in events_by_type(events, "user")]
    return {block["tool_use_id"]: block for block in blocks}


def model_outputs(parts: list[dict[str, Any]]) -> dict[str, str]:
    return {
        part["functionResponse"]["id"]: part["functionResponse"]["response"].get("output", "")
        for part in parts
        if "functionResponse" in part
    }


def lines_of(text: str) -> list[dict[str, Any]]:
    """JSON Lines framed on "\\n" only (never ``splitlines``), each a JSON object."""
    assert text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


# -- run: output formats -------------------------------------------------------------------


def test_run_text_shows_what_the_model_receives_and_dual_output(tmp_path: Path) -> None:
    """Text: each call's model-facing text and the budget; the sidecar has the events."""
    batch = {
        "calls": [
            shell("big", "seq 1 30000"),
            shell("bad", "echo 'no such file' >&2; exit 2"),
            {"id": "nope", "name": "no_such_tool", "args": {}},
        ],
        "budget": 2_000,
    }
    sidecar = tmp_path / "events.jsonl"
    record = tmp_path / "session.jsonl"
    done = run_toolbatch(
        "run",
        "-",
        "--dual-output",
        str(sidecar),
        "--record",
        str(record),
        "--artifacts-dir",
        str(tmp_path / "artifacts"),
        stdin=json.dumps(batch).encode(),
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "== [1/3] run_shell_command (big): success" in out
    assert "== [2/3] run_shell_command (bad): success" in out
    assert "no such file\n[exit code: 2]" in out
    assert "== [3/3] no_such_tool (nope): error" in out
    assert "error: unknown tool 'no_such_tool'" in out
    footer = re.search(r"3 calls: ([\d,]+) of 2,000 characters", out)
    assert footer is not None, out
    assert int(footer.group(1).replace(",", "")) <= 2_000
    [artifact] = (tmp_path / "artifacts").iterdir()
    assert str(artifact) in out
    assert "running;" not in done.stderr.decode()  # no status line: stderr is not a terminal

    events = lines_of(sidecar.read_text(encoding="utf-8"))
    start, *middle, end = events
    assert start["subtype"] == "session_start"
    assert start["data"]["protocol_version"] == 2
    assert end["subtype"] == "session_end"
    assert [event["type"] for event in middle] == ["system"] + ["assistant"] * 3 + ["user"] * 3 + [
        "result"
    ]
    # The sidecar is for programs: its result is the wire parts, as the README promises
    # (JSON.parse works), never the text rendering shown on stdout.
    result = middle[-1]
    assert (result["subtype"], result["is_error"]) == ("success", False)
    parts = json.loads(result["result"])
    [recorded] = load_session(record)
    assert parts == parts_adapter.dump_python(
        recorded.parts, mode="json", by_alias=True, exclude_none=True
    )
    assert [part["functionResponse"]["id"] for part in parts] == ["big", "bad", "nope"]
    assert "== [1/3]" not in sidecar.read_text(encoding="utf-8")
    assert result["budget"]["limit_chars"] == 2_000


def test_run_json_bounds_tool_results_and_leaves_the_model_parts_alone(tmp_path: Path) -> None:
    """Every tool_result.content fits 65,536 bytes; model parts and the record stay whole."""
    # The shell's display is "<output>\n[exit code: 0]": 4 * 16,379 + m + 18 bytes of JSON.
    boundary = {
        f"edge-{65_534 + m}": python_print(f"'a' * {m} + chr(0x1F600) * 16379") for m in (1, 2, 3)
    }
    calls = [shell(call_id, command) for call_id, command in boundary.items()]
    calls += [
        shell("emoji", python_print("chr(0x1F600) * 29000")),
        shell("controls", python_print("chr(1) * 20000")),
        {"id": "mcp-big", "name": "mcp__t__big_text", "args": {"n_chars": 200_000}},
        {"id": "mcp-echo", "name": "mcp__t__echo", "args": {"text": "hello"}},
        {"id": "mcp-image", "name": "mcp__t__image", "args": {"width": 4, "height": 4}},
    ]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(calls))
    record = tmp_path / "session.jsonl"
    done = invoke_toolbatch(
        "run",
        str(batch),
        "--output-format",
        "json",
        "--budget",
        "0",
        "--record",
        str(record),
        "--mcp-config",
        str(write_mcp_config(tmp_path)),
    )
    assert done.returncode == 0, done.stderr.decode()
    stdout = done.stdout.decode()
    events = json.loads(stdout)
    assert [event["type"] for event in events] == (
        ["system"] + ["assistant"] * len(calls) + ["user"] * len(calls) + ["result"]
    )
    results = tool_results(events)
    for call_id, block in results.items():
        assert js_bytes(block["content"]) <= LIMIT, call_id
    for m in (1, 2):
        display = "a" * m + EMOJI * 16_379 + "\n[exit code: 0]"
        assert js_bytes(display) == 65_534 + m
        assert results[f"edge-{65_534 + m}"]["content"] == display
    assert HEADLESS_MARKER in results["edge-65537"]["content"]
    for call_id in ("emoji", "controls", "mcp-big"):
        assert HEADLESS_MARKER in results[call_id]["content"], call_id
    assert results["mcp-echo"]["content"] == "hello"  # its text, not {"text": "hello"}
    assert re.fullmatch(r"\n?\[image/png image, \d+ bytes\]", results["mcp-image"]["content"])

    parts = json.loads(events[-1]["result"])
    outputs = model_outputs(parts)
    assert outputs["emoji"] == EMOJI * 29_000 + "\n[exit code: 0]"
    assert outputs["controls"] == "\x01" * 20_000 + "\n[exit code: 0]"
    assert outputs["edge-65537"] == "aaa" + EMOJI * 16_379 + "\n[exit code: 0]"
    [recorded] = load_session(record)
    dumped = parts_adapter.dump_python(
        recorded.parts, mode="json", by_alias=True, exclude_none=True
    )
    assert dumped == parts
    assert events[-1]["budget"] == {
        "limit_chars": None,
        "used_chars": sum(map(len, outputs.values())),
    }
    assert "persisted_output_files" not in stdout


def test_run_stream_json_writes_one_event_per_line(tmp_path: Path) -> None:
    """stream-json: every line is an event; the result carries the model parts as JSON."""
    calls = [shell("one", "echo one"), shell("two", "printf 'line\\u2028sep\\n'")]
    done = run_toolbatch(
        "run", "--output-format", "stream-json", "-", stdin=json.dumps(calls).encode()
    )
    assert done.returncode == 0, done.stderr.decode()
    events = lines_of(done.stdout.decode())
    assert events[0]["subtype"] == "init"
    assert "run_shell_command" in events[0]["tools"]
    assert [e["message"]["content"][0]["id"] for e in events_by_type(events, "assistant")] == [
        "one",
        "two",
    ]
    result = events[-1]
    assert result["type"] == "result"
    assert result["is_error"] is False
    assert result["num_turns"] == 1
    outputs = model_outputs(json.loads(result["result"]))
    assert outputs == {"one": "one\n[exit code: 0]", "two": "line\u2028sep\n[exit code: 0]"}
    assert result["budget"]["limit_chars"] == 200_000


# -- run: bad input ------------------------------------------------------------------------


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run ``main`` in this process; the logging it configures is put back afterwards."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def run_main(args: list[str], stdin: bytes | None, monkeypatch: pytest.MonkeyPatch) -> int:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return main(args)


BAD_INPUT = [
    pytest.param(["run", "/no/such/batch.json"], None, "'/no/such/batch.json'", id="missing-file"),
    pytest.param(["run", "-"], b"{not json", "not valid JSON", id="invalid-json"),
    pytest.param(["run", "-"], b"", "is empty", id="empty"),
    pytest.param(["run", "-"], b"42", "a batch is an object", id="number"),
    pytest.param(
        ["run", "-"], b'{"calls": "ls"}', "calls: Input should be a valid list", id="calls"
    ),
    pytest.param(["run", "-"], b'[{"id": 1, "name": "x"}]', "calls[0].id", id="call-id"),
    pytest.param(["run", "-"], b'[{"id": "a", "name": "x", "args": {"n": NaN}}]', "NaN", id="nan"),
    pytest.param(["run", "-"], b'{"calls": [], "budget": -3}', "budget", id="batch-budget"),
    pytest.param(["run", "--budget", "-5", "-"], b"[]", "budget must be", id="flag-budget"),
    pytest.param(["run", "--concurrency", "0", "-"], b"[]", "concurrency", id="concurrency"),
    pytest.param(["run", "--timeout", "nan", "-"], b"[]", "timeout", id="timeout"),
    pytest.param(["run", "--output-format", "xml", "-"], b"[]", "output-format", id="format"),
    pytest.param(
        ["run", "--mcp-config", "/no/such/mcp.json", "-"], b"[]", "/no/such/mcp.json", id="mcp"
    ),
    pytest.param(
        # A missing directory is created (as for --record); a file in the way is not.
        ["run", "--dual-output", "/dev/null/events.jsonl", "-"],
        b"[]",
        "/dev/null/events.jsonl",
        id="dual-output",
    ),
]


@pytest.mark.parametrize(("args", "stdin", "fragment"), BAD_INPUT)
def test_bad_input_exits_2_with_a_message_and_no_output(
    in_process: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    stdin: bytes | None,
    fragment: str,
) -> None:
    """Unreadable, invalid or ill-shaped input: exit 2, the value named, stdout empty."""
    code = run_main(args, stdin, monkeypatch)
    captured = capsys.readouterr()
    assert code == 2
    assert fragment in captured.err
    assert captured.out == ""


def test_bad_batch_file_from_the_console_script(tmp_path: Path) -> None:
    """The installed command exits 2 and writes the fix on stderr, nothing on stdout."""
    bad = tmp_path / "batch.json"
    bad.write_text('{"calls": [{"id": "a", "name": "run_shell_command", "arg": {}}]}')
    done = run_toolbatch("run", str(bad), "--output-format", "json")
    assert done.returncode == 2
    assert done.stdout == b""
    message = done.stderr.decode()
    assert "calls[0].arg" in message
    assert '{"id": str, "name": str, "args": {...}}' in message


def test_no_command_prints_help_and_exits_2(
    in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``toolbatch`` alone explains itself on stderr."""
    assert main([]) == 2
    captured = capsys.readouterr()
    assert "run" in captured.err
    assert "serve" in captured.err
    assert captured.out == ""


# -- run: interruption and terminal progress ------------------------------------------------


def test_interrupt_cancels_the_calls_and_still_writes_the_turn(tmp_path: Path) -> None:
    """SIGINT: the running command is stopped, the turn is written, the exit code is 130."""
    marker = f"30.{uuid.uuid4().int % 10**6:06d}"
    started = tmp_path / "started"
    quick_done = tmp_path / "quick-done"
    calls = [
        # The long call starts its sleep only after the quick one has printed and exited.
        shell(
            "long",
            f"while [ ! -e {quick_done} ]; do sleep 0.01; done; touch {started}; sleep {marker}",
        ),
        shell("quick", f"echo quick; exec touch {quick_done}"),
    ]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(calls))
    sidecar = tmp_path / "events.jsonl"
    proc = subprocess.Popen(
        [*TOOLBATCH, "run", "--output-format", "json", "--dual-output", str(sidecar), str(batch)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 60
    while not (started.exists() and processes_with(f"sleep {marker}")):
        assert time.monotonic() < deadline, "the command never started"
        assert proc.poll() is None
        time.sleep(0.02)
    time.sleep(0.5)  # the quick call's process has exited; let its response be collected
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr.decode()
    events = json.loads(stdout)
    results = tool_results(events)
    assert results["long"]["is_error"] is True
    assert "cancelled" in results["long"]["content"]
    assert results["quick"]["content"] == "quick\n[exit code: 0]"
    assert processes_with(f"sleep {marker}") == []
    # The run did not succeed, and its result event says so (the turn is still there).
    for result in (events[-1], lines_of(sidecar.read_text(encoding="utf-8"))[-2]):
        assert result["type"] == "result"
        assert (result["subtype"], result["is_error"]) == ("error_during_execution", True)
        assert result["error"]["message"].startswith("interrupted by SIGINT")
        assert set(model_outputs(json.loads(result["result"]))) == {"long", "quick"}


def test_progress_shows_on_a_terminal(tmp_path: Path) -> None:
    """With stderr on a terminal a status line shows the running calls, then is cleared."""
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([shell("nap", "sleep 0.5; echo rested")]))
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*TOOLBATCH, "run", str(batch)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            seen += chunk
        stdout, _ = proc.communicate(timeout=60)
    finally:
        os.close(leader)
    assert proc.returncode == 0
    terminal = seen.decode(errors="replace")
    assert "toolbatch: 0 done, 1 running; run_shell_command [nap]" in terminal
    assert terminal.endswith("\r\x1b[K")  # cleared once no call runs
    assert b"rested" in stdout


# -- demo and acp --------------------------------------------------------------------------


def test_demo_prints_its_account_and_exits_0(tmp_path: Path) -> None:
    """The demo runs real calls and reports production, model parts, artifacts and budget."""
    done = run_toolbatch("demo", "--workdir", str(tmp_path))
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    for expected in (
        "Turn 1: the model called 3 tools",
        "Turn 2: the model called 3 tools",
        "Turn 3: the model answered",
        "[t1-build]",
        "[t1-ticket] mcp__demo__ticket",
        "[t2-stats] file_stats",
        "[exit code: 1]",
        "by the producer; the finalizer reused it",
        "by the finalizer, once",
        "their parts are exactly what the model received",
    ):
        assert expected in out, expected
    used = [int(n.replace(",", "")) for n in re.findall(r"([\d,]+) chars sent to the model", out)]
    assert len(used) == 2
    assert all(0 < n <= 4_000 for n in used), used
    artifacts = list((tmp_path / "artifacts").iterdir())
    assert len(artifacts) == 3
    for artifact in artifacts:
        assert artifact.name in out
    assert (tmp_path / "build.log").read_text().count("\n") == 3_000
    # What a call produced is what it wrote (the producer's saved complete output), not the
    # size of its display window; an MCP result is described by its text, not its JSON.
    build_bytes = (tmp_path / "build.log").stat().st_size
    lines = out.split("\n")
    produced = {
        lines[index].split("]")[0].strip(" ["): lines[index + 1].split("produced", 1)[1].strip()
        for index, line in enumerate(lines)
        if line.startswith("  [t") and "produced" in lines[index + 1]
    }
    assert produced["t1-build"].startswith(f"{build_bytes:,} bytes, 3,000 lines, all saved by")
    assert produced["t1-ticket"].startswith("213 chars, 3 lines: '#101 [open]")


@pytest.mark.parametrize("command", ["run", "serve", "acp"])
def test_runtime_flags_are_the_same_for_run_serve_and_acp(
    in_process: None, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--budget``, ``--concurrency``, ``--timeout``, ``--mcp-config`` and
    ``--artifacts-dir`` mean the same thing, with the same checks, on every command."""
    assert main([command, "--help"]) == 0
    usage = capsys.readouterr().out
    for flag in ("--budget", "--concurrency", "--timeout", "--mcp-config", "--artifacts-dir"):
        assert flag in usage
    assert main([command, "--concurrency", "0"]) == 2
    assert "must be a whole number >= 1, got '0'" in capsys.readouterr().err


def test_acp_hands_its_arguments_to_the_acp_agent(
    in_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``toolbatch acp --help`` lists the ACP flags beside the runtime ones."""
    assert main(["acp", "--help"]) == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: toolbatch acp")
    assert "--auto-approve" in usage


def test_a_bad_mcp_config_document_is_a_usage_error(
    in_process: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An mcpServers document with a bad entry: exit 2, the entry named, no output."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"broken": {"args": ["x"]}}}))
    batch = tmp_path / "batch.json"
    batch.write_text("[]")
    assert main(["run", str(batch), "--mcp-config", str(config)]) == 2
    captured = capsys.readouterr()
    assert "broken" in captured.err
    assert captured.out == ""
