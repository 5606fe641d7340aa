"""``toolbatch serve`` under hostile input and a stalled reader (issue 14, items 1 and 7)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli._support import Service
from tests.service.test_service import shell, wait_for_statuses
from toolbatch._json_limits import MAX_JSON_DEPTH

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
