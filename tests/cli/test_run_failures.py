"""``toolbatch run`` when its input is hostile or its outputs fail (issue 14, items 1, 8, 10).

Each failure exits non-zero with one line on stderr naming what failed and the fix, never
a traceback, and the results still go wherever output is possible.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli._support import TOOLBATCH, invoke_toolbatch, run_toolbatch

MARKER = "ran-the-command"


def _batch(tmp_path: Path) -> Path:
    path = tmp_path / "batch.json"
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": f"echo {MARKER}"}}
    path.write_text(json.dumps({"calls": [call]}))
    return path


def _one_line(stderr: bytes) -> str:
    lines = stderr.decode().strip().splitlines()
    assert "Traceback" not in stderr.decode()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        pytest.param("deep", "deeper than 128 levels", id="nested-1000-deep"),
        pytest.param("/dev/zero", "larger than 67,108,864 bytes", id="dev-zero-file"),
        pytest.param("stdin-zero", "larger than 67,108,864 bytes", id="dev-zero-stdin"),
    ],
)
def test_hostile_batches_are_usage_errors(tmp_path: Path, source: str, fragment: str) -> None:
    """Exit 2, one line with the limit, nothing on stdout, no RecursionError."""
    if source == "deep":
        deep = tmp_path / "deep.json"
        deep.write_text("[" * 1_000 + "]" * 1_000)
        done = invoke_toolbatch("run", str(deep), cwd=tmp_path)
    elif source == "stdin-zero":
        with open("/dev/zero", "rb") as zero:
            done = subprocess.run(
                [*TOOLBATCH, "run", "-"], stdin=zero, capture_output=True, timeout=90, check=False
            )
    else:
        done = invoke_toolbatch("run", source, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    assert fragment in _one_line(done.stderr)


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        pytest.param(None, "the batch in", id="batch"),
        pytest.param("--settings", "the settings file", id="settings-file"),
        pytest.param("--mcp-config", "the MCP config file", id="mcp-config"),
    ],
)
def test_unclosed_brackets_are_a_usage_error_on_every_input(
    tmp_path: Path, option: str | None, fragment: str
) -> None:
    """Issue 29, item 5: 5 KB of "[" used to crash ``run`` with a RecursionError."""
    unclosed = tmp_path / "unclosed.json"
    unclosed.write_text("[" * 5_000)
    if option is None:
        done = invoke_toolbatch("run", str(unclosed), cwd=tmp_path)
    else:
        done = invoke_toolbatch("run", str(_batch(tmp_path)), option, str(unclosed), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    line = _one_line(done.stderr)
    assert fragment in line
    assert "deeper than 128 levels" in line


def _full(small_fs: Path) -> Path:
    """A file on a filesystem with no room left: its writes fail with ENOSPC."""
    target = small_fs / "out.jsonl"
    target.touch()
    with open(small_fs / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65_536)
                filler.flush()
        except OSError:
            pass
    return target


def test_a_failing_record_still_prints_the_results(tmp_path: Path, small_fs: Path) -> None:
    """--record on a full disk: the command ran and its output is shown; exit 1 with the fix."""
    full = str(_full(small_fs))
    done = invoke_toolbatch("run", str(_batch(tmp_path)), "--record", full, cwd=tmp_path)
    assert done.returncode == 1
    assert MARKER in done.stdout.decode()
    line = _one_line(done.stderr)
    assert line.startswith("toolbatch run: --record failed: cannot append to transcript")
    assert "No space left on device" in line
    assert "the turn was not recorded" in line


def test_stdout_on_dev_full_fails_loudly_and_the_sidecar_gets_everything(tmp_path: Path) -> None:
    """stdout /dev/full: one line naming stdout; the Dual Output sidecar is whole."""
    sidecar = tmp_path / "dual.jsonl"
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [*TOOLBATCH, "run", str(_batch(tmp_path)), "--dual-output", str(sidecar)],
            stdout=full,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            timeout=90,
            check=False,
        )
    assert done.returncode == 1
    line = _one_line(done.stderr)
    assert "cannot write the results to stdout: No space left on device" in line
    events = [json.loads(e) for e in sidecar.read_text().splitlines()]
    assert events[-1]["subtype"] == "session_end"
    assert any(e["type"] == "result" and MARKER in e["result"] for e in events)


def test_dual_output_on_a_full_disk_fails_loudly_and_stdout_gets_the_results(
    tmp_path: Path, small_fs: Path
) -> None:
    """--dual-output on a full disk: stdout is complete; one line names the sidecar."""
    full = str(_full(small_fs))
    done = invoke_toolbatch("run", str(_batch(tmp_path)), "--dual-output", full, cwd=tmp_path)
    assert done.returncode == 1
    assert MARKER in done.stdout.decode()
    line = _one_line(done.stderr)
    assert f"cannot write the results to the dual output file {full!r}" in line
    assert "No space left on device" in line
    assert "--dual-output" in line


def test_closed_stdout_with_a_sidecar_runs_and_says_so(tmp_path: Path) -> None:
    """stdout closed (>&-): the results go to the sidecar, exit 1 with one line."""
    sidecar = tmp_path / "dual.jsonl"
    done = subprocess.run(
        [*TOOLBATCH, "run", str(_batch(tmp_path)), "--dual-output", str(sidecar)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        timeout=90,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 1
    assert "stdout is closed" in _one_line(done.stderr)
    assert MARKER in sidecar.read_text()


def test_closed_stdout_with_nowhere_else_to_write_runs_nothing(tmp_path: Path) -> None:
    """stdout closed and no other output: exit 2 before any command runs."""
    batch = tmp_path / "batch.json"
    call = {"id": "c", "name": "run_shell_command", "args": {"command": "touch ran"}}
    batch.write_text(json.dumps([call]))
    done = subprocess.run(
        [*TOOLBATCH, "run", str(batch)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        timeout=90,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert done.returncode == 2
    assert "would go nowhere" in _one_line(done.stderr)
    assert not (tmp_path / "ran").exists()


def test_the_dual_output_file_is_created_0600(tmp_path: Path) -> None:
    """It holds tool output (secrets among it): only its owner may read it."""
    sidecar = tmp_path / "dual.jsonl"
    done = invoke_toolbatch(
        "run", str(_batch(tmp_path)), "--dual-output", str(sidecar), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    assert MARKER in sidecar.read_text()


def test_a_reader_that_goes_away_is_still_quiet(tmp_path: Path) -> None:
    """| head: exit 141 (128 + SIGPIPE) and nothing on stderr, as cat does."""
    batch = tmp_path / "batch.json"
    call = {"id": "c", "name": "run_shell_command", "args": {"command": "seq 1 200000"}}
    batch.write_text(json.dumps([call]))
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "wb") as closed_pipe:
        done = subprocess.run(
            [*TOOLBATCH, "run", str(batch), "--budget", "0"],
            stdout=closed_pipe,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            timeout=90,
            check=False,
        )
    assert done.returncode == 141
    assert done.stderr == b""


def test_run_json_tells_the_stop_reason_of_a_hook(tmp_path: Path) -> None:
    """A PostToolBatch hook that stops the run: the json result says why (stop_reason)."""
    settings = tmp_path / "settings.json"
    stop = {"type": "command", "command": "echo 'tests are red' >&2; exit 2"}
    settings.write_text(json.dumps({"hooks": {"PostToolBatch": [{"hooks": [stop]}]}}))
    batch = [{"id": "a", "name": "run_shell_command", "args": {"command": "echo hi"}}]
    done = invoke_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--output-format",
        "json",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    result = next(e for e in json.loads(done.stdout) if e["type"] == "result")
    assert "tests are red" in result["stop_reason"]


@pytest.mark.parametrize("flag", ["--settings", "--mcp-config"])
def test_a_config_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path, flag: str) -> None:
    """Invalid UTF-8 in a settings or MCP config file: exit 2 naming the file, no traceback."""
    path = tmp_path / "config.json"
    path.write_bytes(b'{"mcpServers": {}, "note": "\xff\xfe"}')
    done = invoke_toolbatch("run", flag, str(path), stdin=b"[]", cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "is not UTF-8 text" in stderr
    assert str(path) in stderr
    assert "Traceback" not in stderr


def test_acp_with_a_transcript_dir_it_cannot_create_is_a_usage_error(tmp_path: Path) -> None:
    """``acp --transcript-dir /proc/x``: exit 2 naming the flag and the fix, no traceback."""
    done = run_toolbatch("acp", "--transcript-dir", "/proc/x", stdin=b"", cwd=tmp_path)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "--transcript-dir '/proc/x' cannot be created" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize("kind", ["long_mime", "png_then_text", "bm_text", "id3_text"])
def test_run_counts_media_that_is_not_media(tmp_path: Path, kind: str) -> None:
    """An MCP part with a 2,000,000-character MIME type, or text behind an image or audio
    signature: what ``run`` says it sent is what ``result.result`` holds, within budget."""
    hostile = Path(__file__).resolve().parents[1] / "mcp_server" / "hostile.py"
    config = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": [str(hostile), "--stdio"]}
    config.write_text(json.dumps({"mcpServers": {"h": entry}}))
    batch = [{"id": "m", "name": "mcp__h__fake_media", "args": {"kind": kind}}]
    done = invoke_toolbatch(
        "run",
        "--mcp-config",
        str(config),
        "--budget",
        "10000",
        "--output-format",
        "json",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    result = next(e for e in json.loads(done.stdout) if e["type"] == "result")
    assert result["budget"]["used_chars"] <= 10_000
    assert result["budget"]["used_chars"] > 0  # the part's text is counted, not free
    assert len(result["result"]) < 15_000
    assert "inlineData" not in result["result"]
