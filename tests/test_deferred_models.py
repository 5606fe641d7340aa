"""The wire models are built on first use (``defer_build``): threads that first use one at
the same moment all get a working model (issue 33's cold start must not cost correctness).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_FIRST_USE_IN_THREADS = """
import threading
from toolbatch import ToolCall, ToolCallResponse, ToolResult, Turn

barrier = threading.Barrier(16)
failures = []

def first_use(index):
    barrier.wait()
    try:
        call = ToolCall(id=f"c{index}", name="t", args={"n": index})
        response = ToolCallResponse.from_result(call, ToolResult(content=f"out {index}"))
        turn = Turn(responses=[response], parts=list(response.parts))
        assert turn.responses[0].call_id == f"c{index}"
        assert response.model_dump(by_alias=True)["parts"], response
        ToolCall.model_validate({"id": "x", "name": "t", "nope": 1})
    except Exception as exc:
        failures.append(type(exc).__name__)

threads = [threading.Thread(target=first_use, args=(i,)) for i in range(16)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sorted(failures))
"""


def test_models_first_used_by_many_threads_at_once_all_validate() -> None:
    """16 threads building the same deferred models at once: each valid call validates, and
    each call with an unknown field is refused (ValidationError), none half built."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_USE_IN_THREADS],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == str(["ValidationError"] * 16), done.stdout + done.stderr
