"""A failed append never tears the transcript or loses a turn (issue 14, item 4).

"Disk full" is the kernel's ENOSPC on a real 1 MiB tmpfs (``small_fs``), or a real write
past ``RLIMIT_FSIZE`` (EFBIG) in a child process when the run cannot mount one.
"""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.test_recorder import _turn
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler, tool
from toolbatch.errors import RecorderError
from toolbatch.recorder import JsonlRecorder, load_session

BIG = "y" * 1_500_000  # more than the 1 MiB filesystem holds


async def test_a_failed_append_leaves_the_file_as_it_was_and_the_next_works(
    small_fs: Path,
) -> None:
    """ENOSPC mid-record: RecorderError, the bytes unchanged, then a small record lands."""
    path = small_fs / "t.jsonl"
    recorder = JsonlRecorder(path)
    await recorder.record_turn(_turn("first"))
    before = path.read_bytes()
    with pytest.raises(RecorderError, match="the turn was not recorded") as raised:
        await recorder.record_turn(_turn(BIG))
    assert "No space left on device" in str(raised.value)
    assert path.read_bytes() == before
    await recorder.record_turn(_turn("third"))
    entries = load_session(path)
    assert [e.seq for e in entries] == [1, 2]
    assert ["first" in str(e.parts) for e in entries] == [True, False]
    assert "third" in str(entries[1].parts)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@tool(output_threshold=None)
def big(n: int) -> str:
    """n characters (never persisted: the whole text goes into the turn)."""
    return "z" * n


async def test_the_scheduler_reports_a_turn_that_was_not_recorded(small_fs: Path) -> None:
    """run_batch raises RecorderError carrying the turn; later turns are recorded."""
    path = small_fs / "s.jsonl"
    config = SchedulerConfig(
        artifacts_dir=small_fs.parent / "artifacts",
        recorder=JsonlRecorder(path),
        batch_budget=None,
    )
    async with ToolScheduler(Registry([big]), config) as scheduler:
        await scheduler.run_batch([ToolCall(id="a", name="big", args={"n": 10})])
        with pytest.raises(RecorderError) as raised:
            await scheduler.run_batch([ToolCall(id="b", name="big", args={"n": 1_500_000})])
        assert raised.value.turn is not None
        assert raised.value.turn.responses[0].call_id == "b"
        await scheduler.run_batch([ToolCall(id="c", name="big", args={"n": 10})])
    recorded = [entry.responses[0].call_id for entry in load_session(path)]
    assert recorded == ["a", "c"]


_CHILD = """
import resource, signal, sys, anyio
import toolbatch
from toolbatch.recorder import JsonlRecorder
from tests.test_recorder import _turn
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
toolbatch.configure_logging("error")
path = sys.argv[1]
async def main():
    recorder = JsonlRecorder(path)
    await recorder.record_turn(_turn("first"))
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
    try:
        await recorder.record_turn(_turn("x" * 100_000))
    except Exception as exc:
        print(type(exc).__name__, exc)
    await recorder.record_turn(_turn("third"))
anyio.run(main)
"""


def test_a_write_past_the_file_size_limit_is_undone(tmp_path: Path) -> None:
    """A real failing write (EFBIG past RLIMIT_FSIZE), no mount needed: same guarantees."""
    path = tmp_path / "t.jsonl"
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RecorderError ")
    assert "the turn was not recorded" in done.stdout
    entries = load_session(path)
    assert len(entries) == 2
    assert "third" in str(entries[1].parts)


def test_a_record_glued_to_a_fragment_by_an_older_version_still_loads(tmp_path: Path) -> None:
    """A torn fragment followed by a complete record on one line: the record is kept."""
    path = tmp_path / "t.jsonl"
    anyio.run(JsonlRecorder(path).record_turn, _turn("first"))
    anyio.run(JsonlRecorder(path).record_turn, _turn("second"))
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + second[: len(second) // 2] + second)
    entries = load_session(path)
    assert len(entries) == 2
    assert "second" in str(entries[1].parts)
