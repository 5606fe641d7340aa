"""The one summary line per turn (``turn.completed``): emitted when its level is, nowhere else."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, configure_logging, tool


@tool(output_threshold=None)
async def noop() -> str:
    """Do nothing."""
    return "ok"


@pytest.fixture
def restored_structlog() -> Iterator[None]:
    """Each test configures structlog its own way; the suite's set-up comes back after."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


async def _batches(tmp_path: Path, count: int) -> None:
    config = SchedulerConfig(artifacts_dir=tmp_path, sandbox="off")
    async with ToolScheduler(Registry([noop]), config) as scheduler:
        for index in range(count):
            turn = await scheduler.run_batch([ToolCall(id=f"c{index}", name="noop")])
            assert turn.responses[0].status == "success"


@pytest.mark.usefixtures("restored_structlog")
@pytest.mark.parametrize(
    ("level", "logged"),
    [
        pytest.param("debug", True, id="debug"),
        pytest.param("info", True, id="info"),
        pytest.param("warning", False, id="warning"),
        pytest.param("error", False, id="error"),
    ],
)
async def test_turn_summary_follows_the_configured_level(
    tmp_path: Path, level: str, logged: bool
) -> None:
    """A turn's summary line is written at info and below, and never above."""
    stream = io.StringIO()
    configure_logging(level, stream=stream)  # type: ignore[arg-type]
    await _batches(tmp_path, 2)
    lines = [line for line in stream.getvalue().splitlines() if "turn.completed" in line]
    assert len(lines) == (2 if logged else 0), stream.getvalue()
    if logged:
        assert "chars=2" in lines[0]
        assert "responses=1" in lines[0]


@pytest.mark.usefixtures("restored_structlog")
async def test_unconfigured_summary_goes_to_the_stdout_of_the_moment(tmp_path: Path) -> None:
    """Unconfigured structlog prints to ``sys.stdout`` as it is when a turn completes: no
    logger bound for an earlier turn keeps writing to a replaced stream."""
    structlog.reset_defaults()
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(first):
        await _batches(tmp_path / "a", 1)
    with contextlib.redirect_stdout(second):
        await _batches(tmp_path / "b", 1)
    assert first.getvalue().count("turn.completed") == 1
    assert second.getvalue().count("turn.completed") == 1


@pytest.mark.usefixtures("restored_structlog")
async def test_a_wrapper_that_can_say_its_level_is_asked(tmp_path: Path) -> None:
    """A wrapper class other than structlog's filtering ones decides for itself."""
    stream = io.StringIO()

    class WarningsOnly(structlog.BoundLogger):
        def is_enabled_for(self, level: int) -> bool:
            return level >= 30

    structlog.configure(
        wrapper_class=WarningsOnly,
        logger_factory=structlog.PrintLoggerFactory(stream),
        processors=[structlog.processors.KeyValueRenderer()],
    )
    await _batches(tmp_path, 1)
    assert "turn.completed" not in stream.getvalue()


@pytest.mark.usefixtures("restored_structlog")
@pytest.mark.parametrize("level", [0, 10, 20, 30, 40, 50])
def test_the_level_read_from_the_class_is_the_loggers_own(level: int) -> None:
    """For each of structlog's filtering loggers, the summary's check without a logger
    answers what a bound logger's ``is_enabled_for`` does."""
    from toolbatch.scheduler._completion import _logs_info

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(level))
    bound = structlog.get_logger("toolbatch.scheduler").bind()
    assert _logs_info() is bound.is_enabled_for(20)
