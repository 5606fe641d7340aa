"""``toolbatch run | serve | acp`` export over OTLP when the standard variables say so: to a
real OTLP/HTTP receiver on 127.0.0.1, decoded with the OTLP protobuf definitions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parents[2]
TOOLBATCH = [str(Path(sys.executable).with_name("toolbatch"))]
REMOTE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
REMOTE_SPAN = "00f067aa0ba902b7"
TIMEOUT_S = 60


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP receiver: keeps every request body by path, answers 200."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """Every span received, with its resource's attributes."""
        found = []
        for body in self.bodies.get("/v1/traces", []):
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    found.extend((resource, span) for span in scope.spans)
        return found

    def metric_names(self) -> set[str]:
        names = set()
        for body in self.bodies.get("/v1/metrics", []):
            request = ExportMetricsServiceRequest.FromString(body)
            for resource_metrics in request.resource_metrics:
                for scope in resource_metrics.scope_metrics:
                    names.update(metric.name for metric in scope.metrics)
        return names


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _env(collector: Collector, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACE"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
    env.update(extra)
    return env


def _names(spans: list[tuple[dict[str, Any], Any]]) -> list[str]:
    return sorted(span.name for _, span in spans)


def test_run_exports_its_turn_under_the_callers_traceparent(
    collector: Collector, tmp_path: Path
) -> None:
    """``toolbatch run`` with an OTLP endpoint and a ``TRACEPARENT``: the turn joins it."""
    batch = {"calls": [{"id": "c1", "name": "run_shell_command", "args": {"command": "echo hi"}}]}
    done = subprocess.run(
        [*TOOLBATCH, "run", "-", "--artifacts-dir", str(tmp_path)],
        input=json.dumps(batch).encode(),
        capture_output=True,
        env=_env(collector, TRACEPARENT=f"00-{REMOTE_TRACE}-{REMOTE_SPAN}-01"),
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "hi" in done.stdout.decode()
    spans = collector.spans()
    assert _names(spans) == ["execute_tool run_shell_command", "toolbatch.turn"]
    resource, turn = next(item for item in spans if item[1].name == "toolbatch.turn")
    assert resource["service.name"] == "toolbatch"
    assert turn.trace_id.hex() == REMOTE_TRACE
    assert turn.parent_span_id.hex() == REMOTE_SPAN
    assert {"gen_ai.execute_tool.duration", "toolbatch.tool.output.sent"} <= (
        collector.metric_names()
    )


def test_serve_exports_each_batch(collector: Collector, tmp_path: Path) -> None:
    """``toolbatch serve``: each ``batch/run`` is a turn, exported when the service exits."""
    call = {"id": "a", "name": "run_shell_command", "args": {"command": "true"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "batch/run", "params": {"calls": [call]}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
    ]
    done = subprocess.run(
        [*TOOLBATCH, "serve", "--artifacts-dir", str(tmp_path)],
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True,
        env=_env(collector, OTEL_SERVICE_NAME="my-agent-tools"),
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.decode().splitlines() if line]
    assert any(reply.get("id") == 1 and "result" in reply for reply in replies), replies
    spans = collector.spans()
    assert _names(spans) == ["execute_tool run_shell_command", "toolbatch.turn"]
    assert {resource["service.name"] for resource, _ in spans} == {"my-agent-tools"}


def test_acp_exports_the_prompts_turns(collector: Collector, tmp_path: Path) -> None:
    """``toolbatch acp``: a prompt's shell line is a turn with its call span."""
    with subprocess.Popen(
        [*TOOLBATCH, "acp", "--auto-approve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(collector),
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout

        def send(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            stdin.write((json.dumps(message) + "\n").encode())
            stdin.flush()
            while line := stdout.readline():
                reply: dict[str, Any] = json.loads(line)
                if reply.get("id") == request_id and "method" not in reply:
                    return reply
            raise AssertionError(f"the agent closed stdout before answering {method}")

        try:
            send(1, "initialize", {"protocolVersion": 1})
            session = send(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            prompt = [{"type": "text", "text": "$ echo from-acp"}]
            params = {"sessionId": session["result"]["sessionId"], "prompt": prompt}
            assert send(3, "session/prompt", params)["result"]["stopReason"] == "end_turn"
            stdin.close()
            assert proc.wait(timeout=TIMEOUT_S) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    names = _names(collector.spans())
    assert "toolbatch.turn" in names
    assert "execute_tool run_shell_command" in names


MISSING_SDK = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoSdk(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoSdk())
    from toolbatch.cli._main import main

    sys.exit(main(sys.argv[1:]))
    """
)


def test_a_missing_exporter_is_said_once_and_the_run_goes_on(
    collector: Collector, tmp_path: Path
) -> None:
    """Without ``toolbatch[otlp]`` installed: one clear warning, the normal output, exit 0."""
    batch = [{"id": "c1", "name": "run_shell_command", "args": {"command": "echo still-here"}}]
    done = subprocess.run(
        [sys.executable, "-c", MISSING_SDK, "run", "-", "--artifacts-dir", str(tmp_path)],
        input=json.dumps(batch).encode(),
        capture_output=True,
        cwd=ROOT,
        env=_env(collector),
        timeout=TIMEOUT_S,
        check=False,
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "still-here" in done.stdout.decode()
    assert stderr.count("telemetry.exporter_missing") == 1, stderr
    assert "pip install 'toolbatch[otlp]'" in stderr
    assert collector.spans() == []


def test_no_endpoint_no_export(collector: Collector, tmp_path: Path) -> None:
    """Without ``OTEL_EXPORTER_OTLP_ENDPOINT`` nothing is set up and nothing is said."""
    env = _env(collector)
    del env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    done = subprocess.run(
        [*TOOLBATCH, "--log-level", "info", "run", "-", "--artifacts-dir", str(tmp_path)],
        input=b'[{"id": "c1", "name": "run_shell_command", "args": {"command": "true"}}]',
        capture_output=True,
        env=env,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "telemetry." not in done.stderr.decode()
    assert collector.bodies == {}
