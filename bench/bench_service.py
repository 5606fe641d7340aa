"""Service benchmarks: the memory of ``toolbatch serve`` answering one huge batch.

Issue 18's row: one ``batch/run`` of 100,000 calls of a trivial tool (``noop``, which answers
"ok") through the service's own loop (``toolbatch.service.serve`` over pipes, in a child
process), against the same batch through ``ToolScheduler.run_batch`` alone in another
child. Both report their peak RSS (``VmHWM``). The gap is what the service adds (the
request's parsing, the progress notifications, the answer); the baseline is what the
scheduler itself holds for 100,000 calls and their responses (the ``perf`` rows' part).
The service streams its answer in slices and drops what it wrote, so the gap is small.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

from bench._report import Row, Target

AREA = "service"
CALLS: Final = 100_000
QUICK_CALLS: Final = 20_000
TARGET_MB: Final = 250.0
"""Issue 18: peak RSS of ``toolbatch serve`` for one 100,000-call batch, in MB."""
ROOT: Final = Path(__file__).resolve().parents[1]


def _peak_rss_mb(mode: str, calls: int) -> float:
    """Run ``bench._serve_child MODE`` on one batch of ``calls`` noop calls: its peak RSS."""
    batch = [{"id": f"c{i}", "name": "noop", "args": {}} for i in range(calls)]
    request = {"jsonrpc": "2.0", "id": 1, "method": "batch/run"}
    # The budgeted mode's request gives no budget: the session's default applies.
    request["params"] = (
        {"calls": batch} if mode == "serve-budgeted" else {"calls": batch, "budget": 0}
    )
    line = json.dumps(request).encode() + b"\n"
    child = subprocess.Popen(
        [sys.executable, "-m", "bench._serve_child", mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    assert child.stderr is not None
    received = [0]

    def drain() -> None:
        assert child.stdout is not None
        while chunk := child.stdout.read(1 << 20):
            received[0] += len(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    child.stdin.write(line)
    child.stdin.close()
    reader.join()
    lines = child.stderr.read().decode().split()
    if child.wait() != 0 or not lines or received[0] == 0:
        raise RuntimeError(f"the {mode} child failed: {' '.join(lines)[-500:]}")
    return int(lines[-1]) * 1024 / 1e6


def run(*, quick: bool = False) -> list[Row]:
    calls = QUICK_CALLS if quick else CALLS
    served = _peak_rss_mb("serve", calls)
    direct = _peak_rss_mb("direct", calls)
    budgeted = _peak_rss_mb("serve-budgeted", calls)
    return [
        Row(
            area=AREA,
            name=f"toolbatch serve, one {calls:,}-call batch, default budget: peak RSS",
            value=budgeted,
            unit="MB",
            baseline="the same batch through run_batch alone (no service, no budget)",
            baseline_value=direct,
            ratio=budgeted / direct,
            target=f"<= {TARGET_MB:g} MB (issue 30)",
            goal=None if quick else Target("value", "<=", TARGET_MB),
        ),
        Row(
            area=AREA,
            name=f"toolbatch serve, one {calls:,}-call batch of a trivial tool: peak RSS",
            value=served,
            unit="MB",
            baseline="the same batch through run_batch alone (no service)",
            baseline_value=direct,
            ratio=served / direct,
            target=f"<= {TARGET_MB:g} MB (issue 18)",
            goal=None if quick else Target("value", "<=", TARGET_MB),
        ),
    ]
