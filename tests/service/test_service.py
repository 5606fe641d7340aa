"""``toolbatch serve``: JSON-RPC 2.0 over stdio, driven through a real subprocess."""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli._support import TOOLBATCH, Service, processes_with, write_mcp_config
from toolbatch import Registry, SchedulerConfig, ToolScheduler, tool
from toolbatch.cli._runtime import _SchedulerBackend
from toolbatch.errors import ConfigError
from toolbatch.producers import ProducerContext
from toolbatch.service import SERVICE_PROTOCOL_VERSION, parse_batch, serve

NODE = shutil.which("node")
NODE_CLIENT = Path(__file__).with_name("service_client.mjs")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def service(workdir: Path) -> Iterator[Service]:
    """One service with the built-in tools and the test MCP server, shared by the module."""
    config = write_mcp_config(workdir)
    running = Service(
        "--mcp-config", str(config), "--artifacts-dir", str(workdir / "artifacts"), cwd=workdir
    )
    try:
        yield running
        answer = running.call("shutdown")
        assert answer["result"] == {}
        assert running.wait() == 0
    finally:
        running.stop()


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


def run_batch(service: Service, params: dict[str, Any], request_id: Any = None) -> tuple:
    """Send a batch/run; return (its answer, the progress notifications before it)."""
    request_id = service.request("batch/run", params, request_id=request_id)
    seen = service.collect_until(lambda m: m.get("id") == request_id and "method" not in m)
    progress = [m["params"] for m in seen if m.get("method") == "batch/progress"]
    mine = [p for p in progress if p["request_id"] == request_id]
    return seen[-1], mine


def wait_for_statuses(service: Service, request_id: Any, wanted: dict[int, str]) -> None:
    """Read messages until call ``index`` of the batch has reported each wanted status."""
    missing = dict(wanted)

    def reached(message: dict[str, Any]) -> bool:
        params = message.get("params", {})
        if (
            message.get("method") == "batch/progress"
            and params["request_id"] == request_id
            and missing.get(params["index"]) == params["status"]
        ):
            del missing[params["index"]]
        return not missing

    service.collect_until(reached)


def model_text(parts: list[dict[str, Any]]) -> int:
    """Code points of model-facing text in wire parts (output, error, top-level text)."""
    total = 0
    for part in parts:
        if "functionResponse" in part:
            for key in ("output", "error"):
                value = part["functionResponse"]["response"].get(key)
                if isinstance(value, str):
                    total += len(value)
        elif "text" in part:
            total += len(part["text"])
    return total


def output_of(response: dict[str, Any]) -> str:
    return response["parts"][0]["functionResponse"]["response"].get("output", "")


def test_initialize_and_tools_list(service: Service) -> None:
    """initialize reports the protocol; tools/list has the shell and the MCP tools."""
    init = service.call("initialize", {"client_info": {"name": "pytest"}})["result"]
    assert init["protocol_version"] == SERVICE_PROTOCOL_VERSION
    assert init["server_info"]["name"] == "toolbatch"
    assert init["capabilities"] == {
        "batch_progress": True,
        "batch_cancel": True,
        "concurrent_batches": True,
    }
    assert init["default_budget_chars"] == 200_000
    tools = service.call("tools/list")["result"]["tools"]
    names = [declared["name"] for declared in tools]
    assert "run_shell_command" in names
    assert {"mcp__t__echo", "mcp__t__big_text", "mcp__t__fail"} <= set(names)
    for declared in tools:
        assert set(declared) == {"name", "description", "input_schema"}
        assert declared["input_schema"]["type"] == "object"


def test_batch_answers_in_call_order_with_progress_for_every_call(service: Service) -> None:
    """Each call gets queued ... final-status progress, all before the ordered answer."""
    text = "héllo\u2028wörld 😀"
    calls = [
        shell("a", "printf 'one\\n'"),
        shell("b", "echo broken >&2; exit 3"),
        {"id": "c", "name": "mcp__t__echo", "args": {"text": text}},
        {"id": "d", "name": "no_such_tool", "args": {}},
        shell("a", "echo again"),
        {"id": "e", "name": "mcp__t__fail", "args": {"message": "it broke"}},
    ]
    answer, progress = run_batch(service, {"calls": calls, "budget": None}, request_id="b-1")
    responses = answer["result"]["responses"]
    assert [r["call_id"] for r in responses] == ["a", "b", "c", "d", "a", "e"]
    statuses = [r["status"] for r in responses]
    assert statuses == ["success", "success", "success", "error", "duplicate", "error"]
    assert output_of(responses[0]) == "one\n[exit code: 0]"
    assert "broken" in output_of(responses[1])
    assert "[exit code: 3]" in output_of(responses[1])
    assert output_of(responses[2]) == text
    assert "no_such_tool" in responses[3]["parts"][0]["functionResponse"]["response"]["error"]
    assert "it broke" in responses[5]["parts"][0]["functionResponse"]["response"]["error"]
    assert answer["result"]["parts"] == [p for r in responses for p in r["parts"]]
    for index, status in enumerate(statuses):
        mine = [p["status"] for p in progress if p["index"] == index]
        assert mine[0] == "queued", mine
        assert mine[-1] == status, mine
        assert all(p["call_id"] == calls[index]["id"] for p in progress if p["index"] == index)
    assert [p["status"] for p in progress if p["index"] == 0][1] == "running"
    raw = next(line for line in service.raw_lines if b'"id":"b-1"' in line)
    assert "\u2028".encode() in raw  # raw inside the string, the frame ends at "\n" only
    assert not any(b"persisted_output_files" in line for line in service.raw_lines)


def test_budget_bounds_the_model_parts_and_output_is_persisted_once(
    service: Service, workdir: Path
) -> None:
    """A small budget bounds what the model gets; each cut output has one artifact."""
    calls = [
        shell("big", "seq 1 40000"),
        {"id": "mcp", "name": "mcp__t__big_text", "args": {"n_chars": 100_000}},
        shell("medium", "seq 1 3000"),
        shell("small", "echo small"),
    ]
    answer, _ = run_batch(service, {"calls": calls, "budget": 3_000})
    result = answer["result"]
    assert model_text(result["parts"]) <= 3_000
    responses = {r["call_id"]: r for r in result["responses"]}
    assert output_of(responses["small"]) == "small\n[exit code: 0]"
    artifacts = workdir / "artifacts"
    for call_id in ("big", "mcp", "medium"):
        paths = [p for p in artifacts.iterdir() if f"-{call_id}-" in p.name]
        assert len(paths) == 1, paths  # persisted once, by the producer or the finalizer
        assert str(paths[0]) in output_of(responses[call_id])
    [big] = [p for p in artifacts.iterdir() if "-big-" in p.name]
    assert big.read_text() == "".join(f"{i}\n" for i in range(1, 40001))
    assert not any(b"persisted_output_files" in line for line in service.raw_lines)

    unbounded, _ = run_batch(service, {"calls": [shell("whole", "seq 1 3000")], "budget": 0})
    whole = "".join(f"{i}\n" for i in range(1, 3001)) + "[exit code: 0]"
    assert output_of(unbounded["result"]["responses"][0]) == whole


def test_batches_in_flight_answer_independently(service: Service, workdir: Path) -> None:
    """A quick batch answers while a slow one runs; a reused in-flight id is refused."""
    flag = workdir / f"flag-{uuid.uuid4().hex}"
    wait_for_flag = f"while [ ! -e {flag} ]; do sleep 0.02; done; echo slow done"
    service.request("batch/run", {"calls": [shell("s", wait_for_flag)]}, request_id="slow")
    service.request("batch/run", {"calls": [shell("f", "echo fast")]}, request_id="fast")
    seen = service.collect_until(lambda m: m.get("id") == "fast" and "method" not in m)
    assert not any(m.get("id") == "slow" for m in seen)
    assert output_of(seen[-1]["result"]["responses"][0]) == "fast\n[exit code: 0]"
    reuse = service.request("batch/run", {"calls": []}, request_id="slow")
    error = service.collect_until(lambda m: m.get("id") == reuse and "error" in m)[-1]
    assert error["error"]["code"] == -32600
    assert "still running" in error["error"]["message"]
    flag.touch()
    slow = service.collect_until(lambda m: m.get("id") == "slow" and "result" in m)[-1]
    assert output_of(slow["result"]["responses"][0]) == "slow done\n[exit code: 0]"


def test_cancel_answers_with_cancelled_responses_and_leaves_no_process(
    service: Service,
) -> None:
    """batch/cancel stops the sleeps (no process left) and the batch still answers."""
    marker = f"30.{uuid.uuid4().int % 10**6:06d}"
    calls = [shell(f"sleep-{i}", f"sleep {marker}") for i in range(3)]
    calls.append(shell("quick", "echo quick"))
    request_id = service.request("batch/run", {"calls": calls}, request_id=4242)
    wait_for_statuses(service, request_id, {0: "running", 1: "running", 2: "running", 3: "success"})
    # "running" is reported when a call starts, before its shell is spawned: on a loaded
    # machine the shell appears a moment later.
    deadline = time.monotonic() + 30
    while len(processes_with(f"sleep {marker}")) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(processes_with(f"sleep {marker}")) >= 3
    cancel_id = service.request("batch/cancel", {"request_id": request_id})
    seen = service.collect_until(lambda m: m.get("id") == request_id and "result" in m)
    cancel_answer = next(m for m in seen if m.get("id") == cancel_id)
    assert cancel_answer["result"] == {"cancelled": True}
    responses = seen[-1]["result"]["responses"]
    assert [r["status"] for r in responses] == ["cancelled"] * 3 + ["success"]
    assert processes_with(f"sleep {marker}") == []
    assert service.call("batch/cancel", {"request_id": request_id})["result"] == {
        "cancelled": False
    }
    assert service.call("batch/cancel", {"request_id": "never-sent"})["result"] == {
        "cancelled": False
    }


MALFORMED = [
    pytest.param(b"this is not json", -32700, None, "parse error", id="not-json"),
    pytest.param(b"\xff\xfe{}", -32700, None, "invalid UTF-8", id="bad-utf8"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"method":"batch/run","params":{"calls":[],"budget":NaN}}',
        -32700,
        None,
        "NaN",
        id="nan",
    ),
    pytest.param(b"[1, 2]", -32600, None, "batches (arrays) are not supported", id="array"),
    pytest.param(b"42", -32600, None, "must be a JSON object", id="number"),
    pytest.param(
        b'{"jsonrpc":"1.0","id":7,"method":"initialize"}', -32600, 7, '"jsonrpc"', id="version"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":{"a":1},"method":"initialize"}',
        -32600,
        None,
        "id must be",
        id="object-id",
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":8,"method":5}', -32600, 8, '"method"', id="method"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":9,"method":"frobnicate"}', -32601, 9, "frobnicate", id="unknown"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":10,"method":"batch/run","params":{"calls":"ls"}}',
        -32602,
        10,
        "calls",
        id="calls-not-list",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":11,"method":"batch/run","params":{"calls":[],"budget":-1}}',
        -32602,
        11,
        "budget",
        id="negative-budget",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":12,"method":"batch/run","params":{"calls":[{"id":"x",'
        b'"name":"run_shell_command","args":{},"argz":1}]}}',
        -32602,
        12,
        "argz",
        id="unknown-call-key",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":13,"method":"batch/run","params":[1]}',
        -32602,
        13,
        "must be an object",
        id="positional-params",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":14,"method":"batch/cancel","params":{}}',
        -32602,
        14,
        "request_id",
        id="cancel-without-id",
    ),
]


@pytest.mark.parametrize(("line", "code", "answer_id", "fragment"), MALFORMED)
def test_malformed_requests_get_json_rpc_errors(
    service: Service, line: bytes, code: int, answer_id: Any, fragment: str
) -> None:
    """Each malformed line gets one error naming the problem; the service answers on."""
    service.send_raw(b"\n" + line + b"\n")  # the blank line is ignored
    error = service.next_message()
    assert error["jsonrpc"] == "2.0"
    assert error["id"] == answer_id
    assert error["error"]["code"] == code
    assert fragment in error["error"]["message"]
    assert service.call("initialize")["result"]["protocol_version"] == SERVICE_PROTOCOL_VERSION


def test_notifications_are_never_answered(service: Service) -> None:
    """Unknown, invalid and valid notifications get no answer; the next answer is ours."""
    service.send({"jsonrpc": "2.0", "method": "frobnicate"})
    service.send({"jsonrpc": "2.0", "method": "batch/run", "params": {"calls": "bad"}})
    service.send({"jsonrpc": "2.0", "method": "batch/cancel", "params": {"request_id": "x"}})
    service.send({"jsonrpc": "2.0", "method": "batch/cancel", "params": 5})
    request_id = service.request("tools/list")
    answer = service.next_message()
    assert answer["id"] == request_id
    assert "tools" in answer["result"]


def test_shutdown_cancels_batches_answers_and_exits(tmp_path: Path) -> None:
    """shutdown: the running batch answers cancelled, then shutdown is answered, exit 0."""
    marker = f"30.{uuid.uuid4().int % 10**6:06d}"
    service = Service(cwd=tmp_path)
    try:
        batch = service.request("batch/run", {"calls": [shell("s", f"sleep {marker}")]})
        wait_for_statuses(service, batch, {0: "running"})
        shutdown = service.request("shutdown")
        seen = service.collect_until(lambda m: m.get("id") == shutdown)
        answers = [m for m in seen if "method" not in m]
        assert [m["id"] for m in answers] == [batch, shutdown]
        assert answers[0]["result"]["responses"][0]["status"] == "cancelled"
        assert answers[1]["result"] == {}
        assert service.wait() == 0
        assert processes_with(f"sleep {marker}") == []
    finally:
        service.stop()


def test_end_of_input_lets_batches_finish_then_exits(tmp_path: Path) -> None:
    """Closing stdin is a clean shutdown: the batch in flight still answers."""
    service = Service("--budget", "0", cwd=tmp_path)
    try:
        request_id = service.request("batch/run", {"calls": [shell("bye", "echo bye")]})
        service.close_input()
        answer = service.collect_until(lambda m: m.get("id") == request_id)[-1]
        assert output_of(answer["result"]["responses"][0]) == "bye\n[exit code: 0]"
        assert service.wait() == 0
        assert "Traceback" not in service.stderr()
    finally:
        service.stop()


@pytest.mark.skipif(NODE is None, reason="node is not installed: the Node.js client test needs it")
def test_node_client_drives_a_batch_and_a_cancel(tmp_path: Path) -> None:
    """A plain Node.js 20 client runs a batch and cancels a long one through the service."""
    assert NODE is not None
    marker = f"30.{uuid.uuid4().int % 10**6:06d}"
    done = subprocess.run(
        [NODE, str(NODE_CLIENT), marker, *TOOLBATCH],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.strip().split("\n")[-1])
    assert summary["ok"] is True
    assert summary["statuses"] == ["success", "success"]
    assert summary["cancelled_statuses"] == ["cancelled", "cancelled"]
    assert summary["exit_code"] == 0
    assert processes_with(f"sleep {marker}") == []


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        pytest.param({"calls": "ls"}, "calls: Input should be a valid list", id="calls-str"),
        pytest.param([{"id": 1, "name": "x"}], "calls[0].id", id="id-int"),
        pytest.param({"calls": [], "budget": "big"}, "budget", id="budget-str"),
        pytest.param({"calls": [], "budget": True}, "budget", id="budget-bool"),
        pytest.param({"calls": [], "extra": 1}, "extra", id="extra-key"),
        pytest.param("ls", "a batch is an object", id="string"),
    ],
)
def test_parse_batch_names_the_problem(document: object, fragment: str) -> None:
    """A batch of the wrong shape is refused with a message naming the value."""
    with pytest.raises(ConfigError) as raised:
        parse_batch(document)
    assert fragment in str(raised.value)


def test_parse_batch_accepts_a_bare_list_and_resolves_the_budget() -> None:
    """A bare list is the calls; budget None is the default, 0 disables it."""
    batch = parse_batch([{"id": "a", "name": "run_shell_command", "args": {"command": "ls"}}])
    assert [call.ordinal for call in batch.tool_calls()] == [0]
    assert batch.resolve_budget(1_000) == 1_000
    assert parse_batch({"calls": [], "budget": 0}).resolve_budget(1_000) is None
    assert parse_batch({"calls": [], "budget": 50}).resolve_budget(1_000) == 50


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"calls": []}, id="empty"),
        pytest.param(
            {
                "calls": [
                    {"id": "a", "name": "run_shell_command", "args": {"command": "ls"}},
                    {"id": "a", "name": "t"},
                    {"id": "b", "name": "t", "args": {"n": [1, {"x": None}]}},
                ],
                "budget": 50,
            },
            id="calls-and-budget",
        ),
    ],
)
def test_plainly_shaped_params_make_the_calls_validation_makes(params: dict[str, Any]) -> None:
    """The fast path builds calls equal to the validated ones: dumped, copied, pickled alike."""
    from toolbatch.service import plain_batch

    plain = plain_batch(params)
    assert plain is not None
    calls, budget = plain
    batch = parse_batch(params)
    assert budget == batch.budget
    validated = batch.tool_calls()
    assert calls == validated
    assert [call.model_dump_json() for call in calls] == [c.model_dump_json() for c in validated]
    assert [repr(call) for call in calls] == [repr(call) for call in validated]
    assert pickle.loads(pickle.dumps(calls)) == validated
    assert [call.model_copy(update={"ordinal": 9}).ordinal for call in calls] == [9] * len(calls)
    assert [call.ordinal for call in calls] == list(range(len(calls)))


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"calls": [{"id": 1, "name": "t"}]}, id="numeric-id"),
        pytest.param({"calls": [{"id": "a", "name": "t", "extra": 1}]}, id="extra-key"),
        pytest.param({"calls": [{"id": "a", "name": "t", "args": []}]}, id="list-args"),
        pytest.param({"calls": [], "budget": -1}, id="negative-budget"),
        pytest.param({"calls": [], "budget": True}, id="bool-budget"),
        pytest.param({"calls": [], "other": 1}, id="extra-param"),
    ],
)
def test_params_of_any_other_shape_take_the_validating_path(params: dict[str, Any]) -> None:
    """Anything the fast path is not sure of goes to parse_batch, which names the problem."""
    from toolbatch.service import plain_batch

    assert plain_batch(params) is None
    with pytest.raises(ConfigError):
        parse_batch(params)


async def test_serve_in_process_over_pipes_with_progress_from_a_worker_thread(
    tmp_path: Path,
) -> None:
    """``serve`` over real pipes: a sync tool's progress, reported from its thread, arrives."""

    @tool
    def crunch(steps: int, context: ProducerContext) -> str:
        """Count to ``steps``, reporting each step."""
        for step in range(1, steps + 1):
            context.progress(f"step {step} of {steps}")
        return f"crunched {steps}"

    config = SchedulerConfig(batch_budget=None, artifacts_dir=tmp_path)
    request_read, request_write = os.pipe()
    answer_read, answer_write = os.pipe()
    request = {
        "jsonrpc": "2.0",
        "id": "in-process",
        "method": "batch/run",
        "params": {"calls": [{"id": "c", "name": "crunch", "args": {"steps": 3}}]},
    }
    try:
        async with ToolScheduler(Registry([crunch]), config) as scheduler:
            backend = _SchedulerBackend(scheduler, default_budget=1_000)
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    functools.partial(serve, backend, input_fd=request_read, output_fd=answer_write)
                )
                os.write(request_write, json.dumps(request).encode() + b"\n")
                os.close(request_write)  # end of input: serve answers, then returns
                request_write = -1
        os.close(answer_write)
        answer_write = -1
        with os.fdopen(answer_read, "rb") as answers:
            answer_read = -1
            messages = [json.loads(line) for line in answers.read().split(b"\n") if line]
    finally:
        for fd in (request_read, request_write, answer_read, answer_write):
            if fd >= 0:
                os.close(fd)
    progress = [m["params"] for m in messages if m.get("method") == "batch/progress"]
    assert [p.get("message") for p in progress if "message" in p] == [
        "step 1 of 3",
        "step 2 of 3",
        "step 3 of 3",
    ]
    assert progress[0]["status"] == "queued"
    assert progress[-1]["status"] == "success"
    [answer] = [m for m in messages if m.get("id") == "in-process"]
    assert output_of(answer["result"]["responses"][0]) == "crunched 3"


def test_display_is_bounded_on_the_wire_and_small_values_pass_unchanged() -> None:
    """A huge display (string or JSON) stays within 65,536 bytes; parts are untouched."""
    from toolbatch import ToolCall, ToolCallResponse, ToolResult, Turn
    from toolbatch.service import batch_result
    from toolbatch.transports import dumps_json_line, json_string_bytes

    def turn_with(display: Any) -> Turn:
        call = ToolCall(id="c", name="t")
        response = ToolCallResponse.from_result(call, ToolResult(content="x", display=display))
        return Turn(responses=[response], parts=response.parts)

    huge_text = "line\n" * 40_000
    [shown] = batch_result(turn_with(huge_text))["responses"]  # type: ignore[misc]
    assert json_string_bytes(shown["display"]) <= 65_536
    assert shown["display"].endswith("line\n")
    huge_json = {"rows": [{"i": i, "text": "é" * 20} for i in range(5_000)]}
    [shown] = batch_result(turn_with(huge_json))["responses"]  # type: ignore[misc]
    assert isinstance(shown["display"], str)
    assert json_string_bytes(shown["display"]) <= 65_536
    small = {"files": 2, "names": ["a", "b"]}
    [shown] = batch_result(turn_with(small))["responses"]  # type: ignore[misc]
    assert shown["display"] == small
    assert len(dumps_json_line(batch_result(turn_with(huge_text)))) < 70_000
