"""What every framework's tests check: the tool text of the next model request, and no
process left behind after a cancelled run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import anyio

from toolbatch.finalize import TRUNCATION_HEADER

BUDGET = 6_000
"""The batch budget of the tests: three calls of the first turn exceed it together."""
BIG_COMMAND = "seq 1 60000"
"""A command whose output (348,894 characters) the shell previews and persists."""
SMALL_COMMAND = "echo small"
FULL_OUTPUT = re.compile(r"^Full output: (.+)$", re.MULTILINE)


def check_bounded(texts: Sequence[str], *, budget: int = BUDGET) -> list[Path]:
    """The texts fit the budget together; each cut one names its artifact, which exists.

    Returns the artifacts named.
    """
    assert sum(len(text) for text in texts) <= budget, [len(text) for text in texts]
    named: list[Path] = []
    for text in texts:
        if TRUNCATION_HEADER in text:
            paths = [Path(path) for path in FULL_OUTPUT.findall(text)]
            assert paths, text[:300]
            for path in paths:
                assert path.is_file(), path
            named.extend(paths)
    return named


def pid_command(pid_file: Path) -> str:
    """A shell command that writes its pid and then sleeps (it must be killed)."""
    return f"echo $$ > {pid_file}; exec sleep 60"


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, already dead but not reaped, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_for_pid(pid_file: Path, *, timeout_s: float = 20.0) -> int:
    """The pid a command wrote into ``pid_file``, once it is there."""
    path = anyio.Path(pid_file)
    with anyio.fail_after(timeout_s):
        while True:  # the command is another process: there is no event to wait on
            text = await path.read_text() if await path.exists() else ""
            if text.strip():
                return int(text)
            await anyio.sleep(0.01)


async def wait_dead(pids: Sequence[int], *, timeout_s: float = 10.0) -> list[int]:
    """The ``pids`` still running after up to ``timeout_s`` (for a framework that cancels its
    tool tasks without waiting for them to finish)."""
    with anyio.move_on_after(timeout_s):
        while [pid for pid in pids if alive(pid)]:  # noqa: ASYNC110  (other processes: no event)
            await anyio.sleep(0.01)
    return [pid for pid in pids if alive(pid)]
