"""Helpers for the command-line and service tests: run ``toolbatch`` as a real process.

``TOOLBATCH`` is the installed console script (``python -m toolbatch.cli`` when the tests run
outside the venv). ``Service`` drives ``toolbatch serve`` over real pipes: a reader thread
splits stdout on ``"\\n"`` only, as the protocol requires, and keeps every raw line.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MCP_TEST_SERVER = ROOT / "tests" / "mcp_server" / "server.py"
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
