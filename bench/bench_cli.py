"""The command's cold start: ``echo '[]' | toolbatch run -`` (issue 33: at most 0.3 s).

Each run is a fresh process of the installed console script, as a user starts it, with
bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed: an installed package has its
``.pyc`` files, and one untimed run writes them for a source tree). The runs alternate with
``python -c pass`` on the same interpreter, the floor any Python command pays; the figure is
the median wall time. Diagnostics: the CPU time of the same runs (user + system, steadier
than wall time on a loaded machine), the import of ``toolbatch.cli`` alone, and a batch of
one ``true`` (what a first real call adds: its models, the sandbox, the reaper, a process).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from bench._report import Row, Target

AREA: Final = "cli"
RUNS: Final = 11
QUICK_RUNS: Final = 3
COLD_START_TARGET_S: Final = 0.3
"""Issue 33: ``echo '[]' | toolbatch run -`` cold start."""
_ROOT: Final = Path(__file__).resolve().parents[1]


def _command() -> list[str]:
    script = Path(sys.executable).parent / "toolbatch"
    if script.exists():
        return [str(script), "run", "-"]
    return [sys.executable, "-m", "toolbatch.cli", "run", "-"]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(_ROOT)
    return env


def _timed(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command} exited {done.returncode}: {done.stderr[-400:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run(quick: bool) -> list[Row]:
    env = _environment()
    command = _command()
    bare = [sys.executable, "-c", "pass"]
    imports = [sys.executable, "-c", "import toolbatch.cli"]
    _timed(command, b"[]", env)  # writes the bytecode of a source tree, untimed
    one_call = json.dumps([{"id": "c1", "name": "run_shell_command", "args": {"command": "true"}}])
    ours: list[float] = []
    ours_cpu: list[float] = []
    python: list[float] = []
    import_only: list[float] = []
    with_call: list[float] = []
    for _ in range(QUICK_RUNS if quick else RUNS):
        wall, cpu = _timed(command, b"[]", env)
        ours.append(wall)
        ours_cpu.append(cpu)
        python.append(_timed(bare, b"", env)[0])
        import_only.append(_timed(imports, b"", env)[0])
        with_call.append(_timed(command, one_call.encode(), env)[0])
    wall_s, cpu_s = statistics.median(ours), statistics.median(ours_cpu)
    python_s = statistics.median(python)
    return [
        Row(
            area=AREA,
            name=f"echo '[]' | toolbatch run -, cold start (median of {len(ours)})",
            value=wall_s,
            unit="s",
            baseline="python -c pass, same interpreter",
            baseline_value=python_s,
            ratio=wall_s / python_s,
            target=f"<= {COLD_START_TARGET_S:g} s (wall time)",
            goal=Target("value", "<=", COLD_START_TARGET_S),
        ),
        Row(
            area=AREA,
            name="diagnostic: the same runs, CPU time (user + system)",
            value=cpu_s,
            unit="s",
            baseline="python -c pass, same interpreter (wall)",
            baseline_value=python_s,
            ratio=None,
            target="diagnostic (steadier than wall time under load)",
        ),
        Row(
            area=AREA,
            name="diagnostic: python -c 'import toolbatch.cli'",
            value=statistics.median(import_only),
            unit="s",
            baseline="python -c pass, same interpreter",
            baseline_value=python_s,
            ratio=statistics.median(import_only) / python_s,
            target="diagnostic (what the imports cost)",
        ),
        Row(
            area=AREA,
            name="diagnostic: the same with one `true` call",
            value=statistics.median(with_call),
            unit="s",
            baseline="python -c pass, same interpreter",
            baseline_value=python_s,
            ratio=statistics.median(with_call) / python_s,
            target="diagnostic (a first real call's share)",
        ),
    ]
