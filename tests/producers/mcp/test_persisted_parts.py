"""Issue 29, item 1: an MCP result of several text blocks, some over the 500,000-character
trigger, is persisted whole: every character the model does not see is in the one listed
file, and the output carries one header."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.producers.mcp._support import TEST_SERVER
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler
from toolbatch._core import TRUNCATION_HEADER


def _letter_lines(size: int, index: int) -> str:
    """What the test server's ``texts`` tool returns for one block (tests/mcp_server)."""
    line = "abcdefghij"[index % 10] * 79 + "\n"
    return (line * (size // len(line) + 1))[:size]


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param([600_000, 100_000], id="a 600K and a 100K block"),
        pytest.param([510_000] + [10_000] * 59, id="60 blocks, the first over the trigger"),
        pytest.param([10_000] * 30 + [600_000] + [10_000] * 29, id="60 blocks, one in the middle"),
    ],
)
async def test_every_cut_character_is_in_the_one_listed_file(
    tmp_path: Path, sizes: list[int]
) -> None:
    """Budget 10,000: one header, one file, and the file holds every block in full."""
    document = {"mcpServers": {"t": {"command": sys.executable, "args": [str(TEST_SERVER)]}}}
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts", mcp_servers=document, batch_budget=10_000
    )
    async with ToolScheduler(Registry(), config) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="m1", name="mcp__t__texts", args={"sizes": sizes})]
        )
    [response] = turn.responses
    assert response.status == "success"
    assert turn.content_length <= 10_000
    output = response.parts[0].function_response.response["output"]  # type: ignore[union-attr]
    assert output.count(TRUNCATION_HEADER) == 1
    [path] = response.persisted_output_files or ()
    assert output.count(str(path)) == 1
    expected = "\n".join(_letter_lines(size, index) for index, size in enumerate(sizes))
    assert path.read_text() == expected
    assert sorted(tmp_path.joinpath("artifacts").iterdir()) == [path]
