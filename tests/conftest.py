"""Shared fixtures: structlog to stderr (never stdout), real temp dirs, a small real filesystem."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog


def pytest_configure(config: pytest.Config) -> None:
    # The library never configures structlog; test runs do, so nothing lands on stdout.
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB tmpfs, so "disk full" is the kernel's ENOSPC, not a mock."""
    mount_point = tmp_path / f"small-fs-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; this run is not root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
