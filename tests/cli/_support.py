"""Helpers for the command-line and service tests: run ``toolbatch`` as a real process, or
its ``main`` in this one.

``TOOLBATCH`` is the installed console script (``python -m toolbatch.cli`` when the tests run
outside the venv); ``run_toolbatch`` runs it, ``invoke_toolbatch`` calls ``main(argv)`` here
and answers the same way. ``Service`` drives ``toolbatch serve`` over real pipes: a reader thread
splits stdout on ``"\\n"`` only, as the protocol requires, and keeps every raw line.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import structlog

ROOT = Path(__file__).resolve().parents[2]
MCP_TEST_SERVER = ROOT / "tests" / "mcp_server" / "server.py"
ECHO_MCP_SERVER: dict[str, Any] = {
    "command": sys.executable,
    "args": [str(ROOT / "tests" / "mcp_server" / "hostile.py"), "--stdio"],
}
"""An mcpServers entry of a stdio server whose ``echo`` answers its text, started for a tenth
of the CPU of ``MCP_TEST_SERVER`` (0.07 s, no SDK to import; the SDK's server costs 0.7 s):
for the tests of where servers come from, not of what a server sends."""
_SCRIPT = Path(sys.executable).with_name("toolbatch")
TOOLBATCH: list[str] = (
    [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "toolbatch.cli"]
)
MESSAGE_TIMEOUT_S = 60.0


def write_mcp_config(directory: Path) -> Path:
    """An mcpServers file that starts the repository's test MCP server on stdio."""
    path = directory / "mcp.json"
    entry = {"command": sys.executable, "args": [str(MCP_TEST_SERVER)]}
    path.write_text(json.dumps({"mcpServers": {"t": entry}}))
    return path


def run_toolbatch(
    *args: str,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    timeout: float = 90,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``toolbatch ARGS`` to the end; stdout and stderr are captured as bytes.

    ``env`` adds variables to this process's environment (``HOME`` for a test's own
    ``~/.claude``)."""
    return subprocess.run(
        [*TOOLBATCH, *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


def invoke_toolbatch(
    *args: str,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``toolbatch ARGS`` run in this process (``main(argv)``), answered as ``run_toolbatch``
    answers: exit code, stdout and stderr as bytes.

    For the tests of what the command does with its input, flags and configuration, where
    what a process does (signals, exit codes at the OS level, closed or full standard
    streams, stdio framing, orphans) is not the point: each ``toolbatch`` process start costs
    a quarter of a second of CPU. Every command keeps tests that run the real process.
    stdin, stdout and stderr are in-memory streams (so output goes through the text stream
    path, not descriptor 1); ``cwd`` and ``env`` are set for the call and put back, with the
    logging the command configures.
    """
    from toolbatch.cli import main

    def stream(data: bytes, errors: str = "strict") -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors)

    out, err = stream(b""), stream(b"", "backslashreplace")  # Python's own stderr errors
    saved = structlog.get_config()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdin", stream(stdin or b""))
        patch.setattr(sys, "stdout", out)
        patch.setattr(sys, "stderr", err)
        if cwd is not None:
            patch.chdir(cwd)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        try:
            code = main(list(args))
        finally:
            structlog.configure(**saved)
            out.flush()
            err.flush()
    stdout, stderr = (cast(io.BytesIO, s.buffer).getvalue() for s in (out, err))
    return subprocess.CompletedProcess([*TOOLBATCH, *args], code, stdout, stderr)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry.name))
    return found


class Service:
    """``toolbatch serve ARGS`` as a subprocess, spoken to over its stdin and stdout."""

    def __init__(self, *args: str, cwd: Path | None = None) -> None:
        self.stderr_file = tempfile.TemporaryFile()  # noqa: SIM115  # closed by stop()
        self.proc = subprocess.Popen(
            [*TOOLBATCH, "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            cwd=cwd,
        )
        self.raw_lines: list[bytes] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):  # readline splits on b"\n" only
            self.raw_lines.append(line)
            self._inbox.put(json.loads(line))
        self._inbox.put(None)

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    def request(self, method: str, params: Any = None, *, request_id: Any = None) -> Any:
        """Send a request; returns its id (a fresh int unless given)."""
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def next_message(self, timeout: float = MESSAGE_TIMEOUT_S) -> dict[str, Any]:
        message = self._inbox.get(timeout=timeout)
        if message is None:
            raise AssertionError(f"the service closed its output; stderr:\n{self.stderr()}")
        return message

    def collect_until(
        self, done: Callable[[dict[str, Any]], bool], timeout: float = MESSAGE_TIMEOUT_S
    ) -> list[dict[str, Any]]:
        """Every message up to and including the first for which ``done`` is true."""
        seen = []
        while True:
            message = self.next_message(timeout)
            seen.append(message)
            if done(message):
                return seen

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its answer (notifications before it are dropped)."""
        request_id = self.request(method, params)
        return self.collect_until(lambda m: m.get("id") == request_id and "method" not in m)[-1]

    def close_input(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = MESSAGE_TIMEOUT_S) -> int:
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM (the service cancels its batches and exits), SIGKILL if that fails."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=MESSAGE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.stderr_file.close()
