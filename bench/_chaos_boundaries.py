"""The chaos campaign's boundary faults: what reaches toolbatch from outside a batch.

Each is real, against real processes: ``toolbatch serve`` and ``toolbatch acp`` sent lines
nested 1,000 deep (a request with a batch in flight, a notification, a bare array);
``toolbatch run`` given such a batch and ``/dev/zero``; a ``serve`` client that stops
reading while it sends batches; a streamable-HTTP MCP server (``tests/mcp_server/
hostile.py``) answering with an endless SSE event, an endless JSON body and JSON nested
5,000 deep; the same lines with 5,000 brackets never closed (issue 29, item 5); a ``serve``
and an ``acp`` client that send 30,000 small requests and read nothing (issue 29, item 6);
and a host killed with ``kill -9`` in the middle of a batch whose shell command is streaming
into an artifact. ``run_boundaries`` runs them all once and returns
the problems found (each must be absent) and what was injected.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread

from toolbatch import ArtifactStore, ToolCall
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import McpServers, load_mcp_config

__all__ = ["BOUNDARY_KINDS", "run_boundaries"]

ROOT: Final = Path(__file__).resolve().parents[1]
HOSTILE_SERVER: Final = ROOT / "tests" / "mcp_server" / "hostile.py"
TOOLBATCH: Final = [sys.executable, "-m", "toolbatch.cli"]
WAIT_S: Final = 60.0
DEEP: Final = b"[" * 1_000 + b"]" * 1_000
UNCLOSED: Final = b"[" * 5_000
NON_READING_REQUESTS: Final = 30_000
NON_READING_RSS_BOUND_MIB: Final = 300
HTTP_LIMIT_BYTES: Final = 4 * 2**20
RSS_BOUND_MIB: Final = 250
BOUNDARY_KINDS: Final = (
    "boundary.deep_json_serve",
    "boundary.deep_json_acp",
    "boundary.deep_json_run",
    "boundary.stalled_reader",
    "boundary.unclosed_json",
    "boundary.non_reading_client",
    "boundary.http_flood",
    "boundary.kill9_mid_batch",
)

Problems = list[str]


def _popen(
    args: list[str], cwd: Path, env: dict[str, str], **streams: Any
) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*TOOLBATCH, *args], cwd=cwd, env=env, **streams)


def _lines(stream: Any) -> Iterator[dict[str, Any]]:
    for line in stream:
        yield json.loads(line)


def _until(
    messages: Iterator[dict[str, Any]], done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for message in messages:
        if done(message):
            return message
    raise AssertionError("the output ended first")


def _deep_serve(work: Path, env: dict[str, str], nested: bytes = DEEP) -> Problems:
    """A batch in flight, then three lines nested 1,000 deep: three -32600, then its answer."""
    gate = work / f"serve-gate-{len(nested)}"
    os.mkfifo(gate)
    log = work / f"deep-serve-{len(nested)}.log"
    with log.open("wb") as log_file:
        proc = _popen(
            ["serve"], work, env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    problems: Problems = []
    try:
        call = {"id": "s", "name": "run_shell_command", "args": {"command": f"cat {gate}; echo ok"}}
        batch = {
            "jsonrpc": "2.0",
            "id": "batch",
            "method": "batch/run",
            "params": {"calls": [call]},
        }
        proc.stdin.write(json.dumps(batch).encode() + b"\n")
        proc.stdin.flush()
        messages = _lines(proc.stdout)
        _until(messages, lambda m: m.get("params", {}).get("status") == "running")
        for line in (
            b'{"jsonrpc":"2.0","id":"deep","method":"batch/run","params":' + nested + b"}",
            b'{"jsonrpc":"2.0","method":"batch/cancel","params":' + nested + b"}",
            nested,
        ):
            proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        errors = [_until(messages, lambda m: "error" in m) for _ in range(3)]
        if [e["id"] for e in errors] != ["deep", None, None]:
            problems.append(f"serve answered deep lines with ids {[e['id'] for e in errors]}")
        if any(e["error"]["code"] != -32600 for e in errors):
            problems.append(f"serve answered deep lines with {[e['error'] for e in errors]}")
        gate.write_text("go\n")
        answer = _until(messages, lambda m: m.get("id") == "batch" and "method" not in m)
        if answer.get("result", {}).get("responses", [{}])[0].get("status") != "success":
            problems.append(f"the batch in flight answered {str(answer)[:200]}")
        proc.stdin.close()
        if proc.wait(timeout=WAIT_S) != 0:
            problems.append(f"serve exited {proc.returncode}")
    finally:
        _end(proc)
    stderr = log.read_text(errors="replace")
    if "Traceback" in stderr:
        problems.append(f"serve printed a traceback: {stderr[-300:]}")
    return problems


def _deep_acp(work: Path, env: dict[str, str], nested: bytes = DEEP) -> Problems:
    """A script of requests with a deep one among them: an error for it, answers for all."""
    requests = work / f"acp-requests-{len(nested)}.jsonl"
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":' + nested + b"}}",
        nested,
        b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1}}',
    ]
    requests.write_bytes(b"\n".join(lines) + b"\n")
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [*TOOLBATCH, "acp"],
            stdin=stdin,
            capture_output=True,
            cwd=work,
            env=env,
            timeout=WAIT_S,
            check=False,
        )
    problems: Problems = []
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    if done.returncode != 0 or b"Traceback" in done.stderr:
        problems.append(f"acp exited {done.returncode}: {done.stderr[-300:]!r}")
    if set(answers) != {1, 2, 3} or answers[2].get("error", {}).get("code") != -32600:
        problems.append(f"acp answered {sorted(answers, key=str)}: {str(answers.get(2))[:200]}")
    return problems


def _deep_run(work: Path, env: dict[str, str], nested: bytes = DEEP) -> Problems:
    """``toolbatch run`` with a deep batch and with /dev/zero: exit 2, one line each."""
    deep = work / f"deep-batch-{len(nested)}.json"
    deep.write_bytes(nested)
    problems: Problems = []
    for source in (str(deep), "/dev/zero"):
        done = subprocess.run(
            [*TOOLBATCH, "run", source],
            capture_output=True,
            cwd=work,
            env=env,
            timeout=WAIT_S,
            check=False,
        )
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        if done.returncode != 2 or len(lines) != 1 or done.stdout:
            problems.append(f"run {source}: exit {done.returncode}, stderr {lines[-3:]}")
    return problems


def _stalled_reader(work: Path, env: dict[str, str]) -> Problems:
    """A client sends 60 batches (about 25 MB of answers) without reading: the service must
    stop reading requests and keep its memory; then every batch answers."""
    batches, per_batch, padding = 60, 50, "p" * 4_000
    log = work / "stalled-serve.log"
    with log.open("wb") as log_file:
        proc = _popen(
            ["--log-level", "info", "serve"],
            work,
            env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    sent: list[int] = []

    def send() -> None:
        assert proc.stdin is not None
        try:
            for number in range(batches):
                calls = [{"id": f"{padding}{i}", "name": "nope"} for i in range(per_batch)]
                request = {"jsonrpc": "2.0", "id": number, "method": "batch/run"}
                request["params"] = {"calls": calls}
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                sent.append(number)
            proc.stdin.close()
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    problems: Problems = []
    try:
        sender.start()
        deadline = time.monotonic() + WAIT_S
        while b"service.backpressure" not in log.read_bytes():
            if time.monotonic() > deadline or proc.poll() is not None:
                return [f"serve never pushed back (sent {len(sent)}/{batches})"]
            time.sleep(0.05)  # a log file has no readiness event
        rss = _rss_mib(proc.pid)
        if rss > RSS_BOUND_MIB:
            problems.append(f"serve grew to {rss:.0f} MiB while its reader stalled")
        if len(sent) == batches:
            problems.append("serve read every request although its reader stalled")
        answered = {m["id"] for m in _lines(proc.stdout) if "id" in m and "method" not in m}
        sender.join(WAIT_S)
        if answered != set(range(batches)):
            problems.append(f"{batches - len(answered)} batches never answered")
        if proc.wait(timeout=WAIT_S) != 0:
            problems.append(f"serve exited {proc.returncode}")
    finally:
        _end(proc)
    return problems


def _unclosed(work: Path, env: dict[str, str]) -> Problems:
    """The deep-JSON faults again with 5,000 brackets never closed, plus a settings file and
    an MCP config of them given to ``run``: an error for that input each, never a crash."""
    problems = _deep_serve(work, env, UNCLOSED) + _deep_acp(work, env, UNCLOSED)
    problems += _deep_run(work, env, UNCLOSED)
    unclosed = work / "unclosed.json"
    unclosed.write_bytes(UNCLOSED)
    batch = work / "one-call.json"
    batch.write_text(json.dumps([{"id": "c", "name": "run_shell_command", "args": {}}]))
    for option in ("--settings", "--mcp-config"):
        done = subprocess.run(
            [*TOOLBATCH, "run", str(batch), option, str(unclosed)],
            capture_output=True,
            cwd=work,
            env=env,
            timeout=WAIT_S,
            check=False,
        )
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        if done.returncode != 2 or len(lines) != 1 or "deeper than" not in lines[0]:
            problems.append(f"run {option} unclosed: exit {done.returncode}, {lines[-3:]}")
    return problems


def _non_reading(work: Path, env: dict[str, str], command: str) -> Problems:
    """30,000 small requests to ``serve`` or ``acp`` and nothing read: it must stop reading,
    stay under ``NON_READING_RSS_BOUND_MIB``, and answer every one once the client reads."""
    log = work / f"non-reading-{command}.log"
    with log.open("wb") as log_file:
        proc = _popen(
            ["--log-level", "info", command],
            work,
            env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    total = NON_READING_REQUESTS
    sent: list[int] = []
    if command == "serve":
        method, params = "batch/run", {"calls": [{"id": "c", "name": "nope"}]}
    else:
        method, params = "initialize", {"protocolVersion": 1}

    def send() -> None:
        assert proc.stdin is not None
        try:
            for number in range(1, total + 1):
                request = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                sent.append(number)
            proc.stdin.close()
        except OSError:
            pass

    sender = threading.Thread(target=send, daemon=True)
    problems: Problems = []
    event = f"{'service' if command == 'serve' else 'acp'}.backpressure".encode()
    try:
        sender.start()
        deadline = time.monotonic() + WAIT_S
        while event not in log.read_bytes():
            if time.monotonic() > deadline or proc.poll() is not None:
                return [f"{command} never pushed back (sent {len(sent)}/{total})"]
            time.sleep(0.05)  # a log file has no readiness event
        rss = _rss_mib(proc.pid)
        if rss > NON_READING_RSS_BOUND_MIB:
            problems.append(f"{command} grew to {rss:.0f} MiB while its client did not read")
        if len(sent) == total:
            problems.append(f"{command} read every request although nothing was read")
        answered = {m["id"] for m in _lines(proc.stdout) if "id" in m and "method" not in m}
        sender.join(WAIT_S)
        if answered != set(range(1, total + 1)):
            problems.append(f"{total - len(answered)} of {command}'s requests never answered")
        if proc.wait(timeout=WAIT_S) != 0:
            problems.append(f"{command} exited {proc.returncode}")
    finally:
        _end(proc)
    if b"Traceback" in log.read_bytes() or b"MemoryError" in log.read_bytes():
        problems.append(f"{command} logged a traceback")
    return problems


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _http_flood(work: Path) -> Problems:
    """Endless SSE event, endless JSON body, a gzip bomb, JSON 5,000 deep: each fails its call
    with the cap named, the host's memory stays bounded, and the next call works."""
    port = _free_port()
    server = await anyio.open_process(
        [sys.executable, str(HOSTILE_SERVER), "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    problems: Problems = []
    sdk_log = logging.getLogger("mcp")  # the SDK logs each refused body with a traceback
    level = sdk_log.level
    sdk_log.setLevel(logging.CRITICAL)
    try:
        with anyio.fail_after(WAIT_S):
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    await anyio.sleep(0.05)  # a port has no event to wait on
        document = {"mcpServers": {"web": {"url": f"http://127.0.0.1:{port}/mcp"}}}
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        async with McpServers(load_mcp_config(document), max_message_bytes=HTTP_LIMIT_BYTES) as mcp:
            for tool, fragment in (
                ("flood_sse", "max_message_bytes"),
                ("flood_json", "max_message_bytes"),
                ("gzip_bomb", "max_message_bytes"),
                ("deep", "recursion"),
                ("echo", None),
            ):
                name = f"mcp__web__{tool}"
                call = ToolCall(id=tool, name=name, args={"text": "alive"})
                context = ProducerContext(
                    store=ArtifactStore(work / "http-artifacts"), timeout_s=30
                )
                result = await mcp.producer(name).run(call, context)
                if fragment is None and result.error is not None:
                    problems.append(f"the call after the floods failed: {result.error.message}")
                elif fragment is not None and (
                    result.error is None or fragment not in result.error.message
                ):
                    problems.append(f"{tool}: {result.error!r}")
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
        if grown > RSS_BOUND_MIB:
            problems.append(f"the host grew by {grown:.0f} MiB during the HTTP floods")
    finally:
        sdk_log.setLevel(level)
        server.kill()
        await server.wait()
    return problems


_HOST: Final = """
import sys, anyio
import toolbatch
from toolbatch import ToolCall
from toolbatch.scheduler import SchedulerConfig, ToolScheduler, default_registry
toolbatch.configure_logging("error")
artifacts, fifo = sys.argv[1:]
command = f"head -c 20000000 /dev/zero | tr '\\\\0' x; echo $$ > {fifo}; sleep 1000"
async def main():
    config = SchedulerConfig(artifacts_dir=artifacts, sandbox="off")
    async with ToolScheduler(default_registry(), config) as scheduler:
        call = ToolCall(id="c", name="run_shell_command", args={"command": command})
        await scheduler.run_batch([call])
anyio.run(main)
"""


def _kill9(work: Path, env: dict[str, str]) -> Problems:
    """A host streaming 20 MB into an artifact is killed with SIGKILL: its command dies, and
    the next store opened on the directory removes the dead writer's temp part."""
    # Its own marker: the campaign's MCP server carries the campaign's.
    marker = f"CHAOS_KILL9={time.monotonic_ns()}"
    env = {**env, "CHAOS_KILL9": marker.partition("=")[2]}
    artifacts, fifo = work / "kill9-artifacts", work / "kill9-ready"
    os.mkfifo(fifo)
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, str(artifacts), str(fifo)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    problems: Problems = []
    try:
        fifo.read_text()  # the command printed its 20 MB and sleeps
        deadline = time.monotonic() + WAIT_S
        while not list(artifacts.glob(".tmp-*.part")):
            if time.monotonic() > deadline:
                return ["no temp part appeared while the command streamed"]
            time.sleep(0.02)  # the flush runs in the host's worker thread: poll the directory
        host.send_signal(signal.SIGKILL)
        host.wait()
        deadline = time.monotonic() + 10
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)  # the reaper acts on its own schedule: poll /proc
        if left := _marked(marker):
            problems.append(f"processes outlived the host: {left}")
        ArtifactStore(artifacts)
        if parts := list(artifacts.glob(".tmp-*.part")):
            problems.append(f"a dead writer's temp parts stayed: {[p.name for p in parts]}")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    return problems


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "stat").read_text()
        except OSError:
            continue
        if marker.encode() in environ and status.rsplit(")", 1)[-1].split()[0] not in "ZX":
            found.append(int(entry.name))
    return found


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


async def run_boundaries(
    work: Path, marker: str, *, skip: frozenset[str] = frozenset()
) -> tuple[Counter[str], Problems]:
    """Run every boundary fault once under ``work``; what was injected and what broke.

    ``marker`` (``NAME=VALUE``) is put in the environment of every process started, so
    ones left behind can be found in ``/proc``. Kinds in ``skip`` are not run.
    """
    unknown = sorted(skip - set(BOUNDARY_KINDS))
    if unknown:
        raise ValueError(f"unknown boundary faults {unknown}: choose from {BOUNDARY_KINDS}")
    name, _, value = marker.partition("=")
    env = {**os.environ, name: value}
    faults: Counter[str] = Counter()
    problems: Problems = []
    where = work / f"boundaries-{time.monotonic_ns()}"
    where.mkdir(parents=True)
    scenarios: list[tuple[str, Callable[[], Problems]]] = [
        ("boundary.deep_json_serve", lambda: _deep_serve(where, env)),
        ("boundary.deep_json_acp", lambda: _deep_acp(where, env)),
        ("boundary.deep_json_run", lambda: _deep_run(where, env)),
        ("boundary.stalled_reader", lambda: _stalled_reader(where, env)),
        ("boundary.unclosed_json", lambda: _unclosed(where, env)),
        (
            "boundary.non_reading_client",
            lambda: _non_reading(where, env, "serve") + _non_reading(where, env, "acp"),
        ),
        ("boundary.kill9_mid_batch", lambda: _kill9(where, env)),
    ]
    for kind, scenario in scenarios:
        if kind in skip:
            continue
        faults[kind] += 1
        try:
            found = await anyio.to_thread.run_sync(scenario)
        except Exception as exc:  # a scenario that breaks is a problem, not a crash
            found = [f"{type(exc).__name__}: {exc}"]
        problems += [f"{kind}: {problem}" for problem in found]
    if "boundary.http_flood" not in skip:
        faults["boundary.http_flood"] += 1
        try:
            problems += [f"boundary.http_flood: {p}" for p in await _http_flood(where)]
        except Exception as exc:
            problems.append(f"boundary.http_flood: {type(exc).__name__}: {exc}")
    return faults, problems
