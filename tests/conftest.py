"""Shared fixtures: structlog to stderr (never stdout), real temp dirs, a small real filesystem.

No test writes into the real per-user state directory: ``TOOLBATCH_STATE_DIR`` points at a
temp dir for the whole run (module-scoped fixtures and subprocesses see it) and at a fresh
one for each test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, settings

from tests.readme_runs import ReadmeRuns
from toolbatch.artifacts._home import STATE_DIR_ENV

# Hypothesis: small by default (the edit loop), full where HYPOTHESIS_PROFILE=ci (.ci/run).
settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile(
    "dev", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


TESTS = Path(__file__).resolve().parent
# The fast tier (`make check`): pure logic, no subprocess, server or model API. Every other
# test is marked `integration` below; `make test` runs both.
FAST_TIER = (
    "finalize/",
    "providers/",
    "transports/test_json_string.py",
    "transports/test_acp_projection.py",
    "permissions/",
    "test_preview.py",
    "test_text.py",
    "test_wire.py",
    "test_json_limits.py",
    "test_layers.py",
    "test_no_pydantic_internals.py",
    "test_calls.py",
    "test_public_api.py",
    "test_descriptor_io.py",
)


# Modules that import the model SDKs when their tests run (tests/providers/_sdk.py).
SDK_MODULES = (
    "agent/test_model_clients.py",
    "providers/test_anthropic.py",
    "providers/test_gemini.py",
    "providers/test_openai_chat.py",
    "providers/test_openai_responses.py",
    "providers/test_properties.py",
)
# Modules whose tests wait longest (servers, slow disks, hypothesis over large payloads),
# started first so that under xdist they overlap the many short tests instead of ending the
# run alone (longest first). Whole modules move, so module fixtures are still set up once.
# xdist groups (ray, the chaos campaign) are dispatched before any of these.
EARLY = (
    "providers/test_properties.py",
    "service/test_limits.py",
    "acp/test_limits.py",
    "acp/",
    "test_persist_deadlines.py",
    "test_readme.py",
    "telemetry/test_mcp_startup_spans.py",
    "telemetry/test_export.py",
    "cli/test_progress.py",
    "cli/test_config_sources.py",
    "producers/mcp/",
    "test_examples.py",
)


def _start_rank(relative: str) -> int:
    return next((rank for rank, p in enumerate(EARLY) if relative.startswith(p)), len(EARLY))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    relatives = {item: item.path.resolve().relative_to(TESTS).as_posix() for item in items}
    for item in items:
        relative = relatives[item]
        if not relative.startswith(FAST_TIER):
            item.add_marker(pytest.mark.integration)
        if relative.startswith("ray/"):
            # One Ray instance per run: every Ray test runs in the same xdist worker.
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif relative.startswith(SDK_MODULES):
            # The model SDKs (seconds of CPU to import) are imported by one worker only.
            item.add_marker(pytest.mark.xdist_group("model-sdks"))
    items.sort(key=lambda item: _start_rank(relatives[item]))


class _XdistGroups:
    """Gives each test of an ``xdist_group`` its group under ``--dist loadgroup``, once every
    marker is on it.

    xdist marks a group by suffixing the test's nodeid in its own
    ``pytest_collection_modifyitems``, which runs before the one above (so the groups added
    there were missed) and, from pytest 9.2 (structured node ids), writes a field pytest no
    longer reads (pytest-dev/pytest-xdist#1386, fix proposed in #1388): no test was grouped.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        yield
        if not getattr(config.option, "loadgroup", False):
            return
        for item in items:
            marks = item.iter_markers("xdist_group")
            groups = sorted(
                {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
            )
            nodeid = item.nodeid
            if not groups or nodeid.endswith(suffix := f"@{'_'.join(groups)}"):
                continue
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's suffix, of fewer groups
                nodeid = nodeid[: nodeid.rfind("@")]
            if hasattr(item, "_id"):  # pytest >= 9.2
                from _pytest.nodeid import NodeId

                item._id = NodeId.parse(nodeid + suffix)
            else:
                item._nodeid = nodeid + suffix


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_XdistGroups(), "xdist-groups")
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


@pytest.fixture(scope="session", autouse=True)
def _session_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The state directory of fixtures wider than one test."""
    with pytest.MonkeyPatch.context() as patch:
        state = tmp_path_factory.mktemp("state")
        patch.setenv(STATE_DIR_ENV, str(state))
        yield state


@pytest.fixture(autouse=True)
def state_dir(
    _session_state_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """This test's own per-user state directory (where default artifact sessions go)."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv(STATE_DIR_ENV, str(state))
    return state


@pytest.fixture(scope="session")
def readme_runs(tmp_path_factory: pytest.TempPathFactory) -> ReadmeRuns:
    """The README's console blocks, each run once (``tests/readme_runs.py``)."""
    return ReadmeRuns(tmp_path_factory)


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
