"""What every framework's tests check: the tool text of the next model request, and no
process left behind after a cancelled run."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

import anyio
import pytest

from tests.processes import alive as alive
from toolbatch.finalize import TRUNCATION_HEADER

BUDGET = 6_000
"""The batch budget of the tests: three calls of the first turn exceed it together."""
BIG_COMMAND = "seq 1 60000"
"""A command whose output (348,894 characters) the shell previews and persists."""
SMALL_COMMAND = "echo small"
FULL_OUTPUT = re.compile(r"^Full output: (.+)$", re.MULTILINE)
INTEGRATIONS = pytest.mark.xdist_group("integrations")
"""The framework modules' xdist group: one worker imports the frameworks (seconds of CPU)."""


def requires(module: str) -> pytest.MarkDecorator:
    """Skip a test module when ``module`` is not installed, with ``pytest.importorskip``'s
    reason, without importing it: the frameworks are imported by the tests that use them, so
    collecting these modules (every xdist worker does) costs no framework import."""
    parts = module.split(".")
    for end in range(1, len(parts) + 1):
        name = ".".join(parts[:end])
        if find_spec(name) is None:  # a parent package found is imported: each is a cheap one
            reason = f"could not import {module!r}: No module named {name!r}"
            return pytest.mark.skipif(True, reason=reason)
    return pytest.mark.skipif(False, reason=f"{module!r} is installed")


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


def _sleep_seconds(pid_file: Path) -> str:
    """A duration unique to ``pid_file``: the sleep is found by its command line, because
    under the sandbox's PID namespace ``$$`` is a number of the command's own namespace."""
    return f"60.{zlib.crc32(str(pid_file).encode()):010d}"


def pid_command(pid_file: Path) -> str:
    """A shell command that says it started, then sleeps (it must be killed)."""
    return f"echo started > {pid_file}; exec sleep {_sleep_seconds(pid_file)}"


def _pid_running(argv: bytes) -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == argv:
                    return int(entry.name)
            except OSError:
                continue
    return None


def running_pid(pid_file: Path) -> int | None:
    """The host's pid of the sleep ``pid_command(pid_file)`` runs, if it runs now."""
    if not pid_file.exists():
        return None
    return _pid_running(b"sleep\0" + _sleep_seconds(pid_file).encode() + b"\0")


async def wait_for_pid(pid_file: Path, *, timeout_s: float = 20.0) -> int:
    """The host's pid of the sleep ``pid_command(pid_file)`` runs, once it runs."""
    path = anyio.Path(pid_file)
    argv = b"sleep\0" + _sleep_seconds(pid_file).encode() + b"\0"
    with anyio.fail_after(timeout_s):
        while True:  # the command is another process: there is no event to wait on
            if await path.exists():
                pid = _pid_running(argv)
                if pid is not None:
                    return pid
            await anyio.sleep(0.01)


async def wait_dead(pids: Sequence[int], *, timeout_s: float = 10.0) -> list[int]:
    """The ``pids`` still running after up to ``timeout_s`` (for a framework that cancels its
    tool tasks without waiting for them to finish)."""
    with anyio.move_on_after(timeout_s):
        while [pid for pid in pids if alive(pid)]:  # noqa: ASYNC110  (other processes: no event)
            await anyio.sleep(0.01)
    return [pid for pid in pids if alive(pid)]
