"""``toolbatch serve`` under hostile input and a stalled reader (issue 14, items 1 and 7)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest

from tests.cli._support import TOOLBATCH, Service
from tests.service.test_service import shell, wait_for_statuses
from toolbatch import Registry, SchedulerConfig, ToolScheduler, tool
from toolbatch._core._json_limits import MAX_JSON_DEPTH
from toolbatch.cli._runtime import _SchedulerBackend
from toolbatch.service import _service, serve

DEEP = b"[" * 1_000 + b"]" * 1_000


@pytest.mark.parametrize(
    ("line", "answer_id"),
    [
        pytest.param(
            b'{"jsonrpc":"2.0","id":"deep","method":"batch/run","params":{"calls":' + DEEP + b"}}",
            "deep",
            id="request-with-id",
        ),
        pytest.param(DEEP, None, id="bare-array"),
        pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, None, id="objects-100k-deep"),
    ],
)
def test_deep_json_is_refused_for_that_request_and_batches_in_flight_answer(
    tmp_path: Path, line: bytes, answer_id: object
) -> None:
    """-32600 naming the limit, under the request's id when readable; the service goes on."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    service = Service(cwd=tmp_path)
    try:
        batch = service.request("batch/run", {"calls": [shell("s", f"cat {gate}; echo ok")]})
        wait_for_statuses(service, batch, {0: "running"})
        service.send_raw(line + b"\n")
        error = service.collect_until(lambda m: "error" in m)[-1]
        gate.write_text("go\n")  # the batch was in flight all along; now it may end
        assert error["id"] == answer_id
        assert error["error"]["code"] == -32600
        assert f"deeper than {MAX_JSON_DEPTH} levels" in error["error"]["message"]
        answer = service.collect_until(lambda m: m.get("id") == batch and "method" not in m)[-1]
        [response] = answer["result"]["responses"]
        assert response["status"] == "success"
        assert "ok" in str(response["parts"])
        assert service.call("initialize")["result"]["protocol_version"] == 1
        service.close_input()
        assert service.wait() == 0
        assert "Traceback" not in service.stderr()
    finally:
        service.stop()


def test_params_just_within_the_limit_are_accepted(tmp_path: Path) -> None:
    """An argument nested to the limit runs: the limit refuses only what is over it."""
    service = Service(cwd=tmp_path)
    try:
        nested: object = "x"
        for _ in range(MAX_JSON_DEPTH - 6):  # the envelope takes six levels
            nested = [nested]
        call = {"id": "c", "name": "run_shell_command", "args": {"command": "true", "n": nested}}
        answer = service.call("batch/run", {"calls": [call]})
        [response] = answer["result"]["responses"]
        assert response["status"] == "error"  # an unknown argument: answered, not refused
        assert "n" in str(response["parts"])
    finally:
        service.stop()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _wait_for_log(path: Path, event: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the service logged ``event`` (its stderr is a file: read it as it grows)."""
    deadline = time.monotonic() + 60
    while event not in path.read_text(errors="replace"):
        assert proc.poll() is None, path.read_text(errors="replace")
        assert time.monotonic() < deadline, f"no {event} within 60 s"
        time.sleep(0.05)  # a file has no readiness event to wait on


def test_a_stalled_reader_stops_new_requests_and_memory_stays_bounded(tmp_path: Path) -> None:
    """300 batches (~120 MB of answers) to a client that does not read: the service stops
    reading requests, its RSS stays flat; once the client reads, every batch answers."""
    batches, calls_per_batch = 300, 50
    padding = "p" * 4_000  # long call ids make long answers out of cheap calls
    stderr = tmp_path / "serve.log"
    with stderr.open("wb") as log_file:
        proc = subprocess.Popen(
            [*TOOLBATCH, "--log-level", "info", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=tmp_path,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    sent: list[int] = []

    def send_all() -> None:
        assert proc.stdin is not None
        for number in range(batches):
            calls = [
                {"id": f"{padding}{i}", "name": "no_such_tool"} for i in range(calls_per_batch)
            ]
            request = {"jsonrpc": "2.0", "id": number, "method": "batch/run"}
            request["params"] = {"calls": calls}
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            sent.append(number)
        proc.stdin.close()

    sender = threading.Thread(target=send_all, daemon=True)
    try:
        sender.start()
        _wait_for_log(stderr, "service.backpressure", proc)
        rss = _rss_mib(proc.pid)
        assert len(sent) < batches  # it stopped taking requests: the sender is blocked
        assert rss < 250, f"{rss:.0f} MiB while the reader stalls"
        answered = set()
        for line in proc.stdout:
            message = json.loads(line)
            if "id" in message and "method" not in message:
                assert len(message["result"]["responses"]) == calls_per_batch
                answered.add(message["id"])
        sender.join(timeout=60)
        assert answered == set(range(batches))
        assert proc.wait(timeout=60) == 0
        assert "Traceback" not in stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def test_a_client_that_never_reads_30000_small_answers_stops_being_read(tmp_path: Path) -> None:
    """Issue 29, item 6: answers count toward the high-water mark. 30,000 one-call batches
    to a client that reads nothing took the service to 4 GB; now it stops reading requests,
    stays under 300 MB, and once the client reads every batch answers."""
    batches = 30_000
    stderr = tmp_path / "serve.log"
    with stderr.open("wb") as log_file:
        proc = subprocess.Popen(
            [*TOOLBATCH, "--log-level", "info", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=tmp_path,
        )
    assert proc.stdin is not None
    assert proc.stdout is not None
    sent: list[int] = []

    def send_all() -> None:
        assert proc.stdin is not None
        for number in range(batches):
            params = {"calls": [{"id": "c", "name": "no_such_tool"}]}
            request = {"jsonrpc": "2.0", "id": number, "method": "batch/run", "params": params}
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            sent.append(number)
        proc.stdin.close()

    sender = threading.Thread(target=send_all, daemon=True)
    try:
        sender.start()
        _wait_for_log(stderr, "service.backpressure", proc)
        rss = _rss_mib(proc.pid)
        assert len(sent) < batches  # it stopped taking requests: the sender is blocked
        assert rss < 300, f"{rss:.0f} MiB while the reader stalls"
        answered = set()
        for line in proc.stdout:
            message = json.loads(line)
            if "id" in message and "method" not in message:
                assert message["result"]["responses"][0]["status"] == "error"
                answered.add(message["id"])
        sender.join(timeout=60)
        assert answered == set(range(batches))
        assert proc.wait(timeout=60) == 0
        assert "MemoryError" not in stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


async def test_the_streamed_answer_is_the_batch_result_byte_for_byte() -> None:
    """Written in slices, the answer line is exactly the one built whole."""
    from toolbatch import ToolCall, ToolCallResponse, ToolResult, Turn
    from toolbatch.service._batches import STREAM_SLICE, _streamed_answer, batch_result
    from toolbatch.transports import dumps_json_line

    responses = [
        ToolCallResponse.from_result(
            ToolCall(id=f"c{i}", name="t"), ToolResult(content=f"out \udcff {i} 漢")
        )
        for i in range(2 * STREAM_SLICE + 7)
    ]
    turn = Turn(
        responses=responses, parts=[p for r in responses for p in r.parts], stop_reason="stop"
    )
    whole = dumps_json_line({"jsonrpc": "2.0", "id": "r1", "result": batch_result(turn)}) + "\n"
    assert "".join(_streamed_answer("r1", turn)) == whole


async def test_a_reader_that_never_reads_does_not_keep_serve_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Input ends while the output pipe is full and unread: once the batch has answered,
    ``serve`` waits out the grace and returns, its output descriptor open and blocking."""

    @tool
    async def noop() -> str:
        """Answer "ok"."""
        return "ok"

    monkeypatch.setattr(_service, "SHUTDOWN_GRACE_S", 0.5)
    calls = [{"id": f"c{i}", "name": "noop", "args": {}} for i in range(10_000)]
    request = {"jsonrpc": "2.0", "id": 1, "method": "batch/run", "params": {"calls": calls}}
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(json.dumps(request).encode() + b"\n")  # read whole, then EOF
    request_fd = os.open(requests, os.O_RDONLY)
    answer_read, answer_write = os.pipe()
    try:
        config = SchedulerConfig(batch_budget=None, artifacts_dir=tmp_path)
        async with ToolScheduler(Registry([noop]), config) as scheduler:
            backend = _SchedulerBackend(scheduler, default_budget=None)
            with anyio.fail_after(60):  # 3 MB of progress, and nobody reads the pipe
                await serve(backend, input_fd=request_fd, output_fd=answer_write)
        assert os.get_blocking(answer_write)
        os.close(answer_write)  # the caller's descriptor was the last writer: EOF follows
        answer_write = -1
        with os.fdopen(answer_read, "rb") as answers:
            answer_read = -1
            written = answers.read()
    finally:
        for fd in (request_fd, answer_read, answer_write):
            if fd >= 0:
                os.close(fd)
    lines = written.split(b"\n")[:-1]  # what the pipe held: whole lines, then a torn one
    assert [json.loads(line)["params"]["status"] for line in lines[:3]] == ["queued"] * 3
    assert all(json.loads(line)["method"] == "batch/progress" for line in lines)
