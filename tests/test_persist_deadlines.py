"""Issue 29, item 2: every persist has a deadline, on a real slow or hanging disk.

``SlowDiskStore`` is a real ``ArtifactStore`` whose fsyncs wait (6 s each: a slow disk) or
never return until released (a hanging disk). A caller stops waiting at its deadline: the
result keeps its preview with an "unsaved" note, nothing finished is lost, and the write
is removed in the background once its thread returns.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import toolbatch
from tests.producers.mcp._support import TEST_SERVER
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolCallResponse, ToolScheduler
from toolbatch.finalize import finalize_tool_responses
from toolbatch.producers import ShellProducer
from toolbatch.testing import SlowDiskStore

UNSAVED = "The full output was not saved"


@pytest.fixture
def hanging(tmp_path: Path) -> Iterator[SlowDiskStore]:
    store = SlowDiskStore(tmp_path / "artifacts", fallback_dir=tmp_path / "fallback", hang=True)
    yield store
    store.release()


def _parts(store: SlowDiskStore) -> list[Path]:
    return [p for d in (store.root, store.fallback_dir) if d.exists() for p in d.iterdir()]


@toolbatch.tool(timeout_s=3)
def report() -> str:
    """A finished tool with 100,000 characters of output (over the 25,000 threshold)."""
    return "".join(f"row {i:06d}\n" for i in range(9_091))


@toolbatch.tool(timeout_s=3)
async def async_report() -> str:
    """The same, as an async tool."""
    return "".join(f"row {i:06d}\n" for i in range(9_091))


@pytest.mark.parametrize("tool", [report, async_report], ids=["sync", "async"])
async def test_a_finished_tool_on_a_hanging_disk_keeps_its_preview(
    hanging: SlowDiskStore, tool: object
) -> None:
    """timeout_s=3 and a store that never returns: success within 3 s, the preview says
    the output was not saved; once the disk comes back the half-written file is gone."""
    registry = Registry([tool])
    config = SchedulerConfig(store=hanging)
    name = tool.declaration.name  # type: ignore[attr-defined]
    started = time.monotonic()
    async with ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="r1", name=name)])
    elapsed = time.monotonic() - started
    [response] = turn.responses
    assert response.status == "success", response.error
    assert elapsed < 3
    output = response.parts[0].function_response.response["output"]  # type: ignore[union-attr]
    assert UNSAVED in output
    assert "row 000000" in output
    assert "row 009090" in output
    assert response.persisted_output_files == ()
    hanging.release()
    # The cleanup runs on the store's daemon thread when its fsync returns: nothing to await.
    with anyio.fail_after(10):
        while _parts(hanging):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def test_an_mcp_call_on_a_hanging_disk_answers_within_its_timeout(
    hanging: SlowDiskStore,
) -> None:
    """A 600,000-character MCP result at call_timeout=3: answered within about 3 s (it took
    13 s when the store's wait was not bounded by the call's timeout)."""
    document = {"mcpServers": {"t": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}
    config = SchedulerConfig(store=hanging, mcp_servers=document, call_timeout=3)
    async with ToolScheduler(Registry(), config) as scheduler:
        await scheduler.wait_for_tools()  # the server's start is not the call's time
        started = time.monotonic()
        turn = await scheduler.run_batch(
            [ToolCall(id="m1", name="mcp__t__big_text", args={"n_chars": 600_000})]
        )
        elapsed = time.monotonic() - started
    [response] = turn.responses
    assert response.status == "success", response.error
    assert elapsed < 6  # 3 s and the margin of a loaded 2-core machine; unbounded: 13 s
    output = response.parts[0].function_response.response["output"]  # type: ignore[union-attr]
    assert UNSAVED in output
    assert response.persisted_output_files == ()


async def test_finalize_on_a_slow_disk_keeps_its_deadline(tmp_path: Path) -> None:
    """fsync takes 6 s: finalize(persist_timeout_s=1) returns in about 1 s, within budget."""
    store = SlowDiskStore(tmp_path / "artifacts", fsync_delay_s=6)
    responses = [
        ToolCallResponse.from_result(
            ToolCall(id=f"c{i}", name="t"), toolbatch.ToolResult(content="x" * 50_000)
        )
        for i in range(3)
    ]
    started = time.monotonic()
    finalized = await finalize_tool_responses(
        responses, budget=10_000, store=store, persist_timeout_s=1
    )
    assert time.monotonic() - started < 2
    assert sum(r.content_length for r in finalized) <= 10_000
    assert all(r.persisted_output_files == () for r in finalized)


async def test_a_shell_abort_on_a_slow_disk_returns_within_its_stop_budget(
    tmp_path: Path,
) -> None:
    """Abort at 1.5 s with fsyncs of 6 s: back within the kill grace, drain and cleanup
    bound (about 8 s), with the output produced so far and an unsaved note."""
    store = SlowDiskStore(tmp_path / "artifacts", fsync_delay_s=6)
    registry = Registry([ShellProducer()])
    config = SchedulerConfig(store=store, sandbox="off")
    abort = anyio.Event()
    command = "seq 1 200000; sleep 60"
    async with ToolScheduler(registry, config) as scheduler, anyio.create_task_group() as tg:
        tg.start_soon(_abort_after, abort, 1.5)
        started = time.monotonic()
        turn = await scheduler.run_batch(
            [ToolCall(id="s1", name="run_shell_command", args={"command": command})],
            abort=abort,
        )
        elapsed = time.monotonic() - started
    [response] = turn.responses
    assert response.status == "cancelled"
    assert elapsed - 1.5 < 8.5  # from the abort: the kill grace, drain and cleanup bound
    text = str(response.parts[0].function_response.response)  # type: ignore[union-attr]
    assert "200000" in text
    assert UNSAVED in text or "not saved" in text


async def _abort_after(abort: anyio.Event, seconds: float) -> None:
    await anyio.sleep(seconds)
    abort.set()
