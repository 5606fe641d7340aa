"""A scripted agent loop with real tools and no network.

Run it: ``python examples/scripted_loop.py``

A fake model (``ScriptedModel``) plays three turns of tool calls against real producers: the
shell (one command prints 200,000 lines), an MCP server started over stdio (toolbatch's
small demo server), and a custom ``@toolbatch.tool``. Each turn is finalized to a 12,000
character budget, recorded to a transcript before the model sees it, and printed: what the
model received and where the complete output was kept.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

import toolbatch
from toolbatch.agent import AgentLoop, ScriptedModel
from toolbatch.finalize import response_text_length


@toolbatch.tool(read_only=True)
def slugify(title: str) -> str:
    """Turn a title into a branch name.

    Args:
        title: the title to shorten.
    """
    words = "".join(ch if ch.isalnum() else " " for ch in title.lower()).split()
    return "-".join(words[:6])


SCRIPT: list[toolbatch.agent.ScriptStep] = [
    [
        {"name": "run_shell_command", "args": {"command": "seq 1 200000"}},
        {"name": "mcp__demo__ticket", "args": {"number": 101}},
        {"name": "run_shell_command", "args": {"command": "ls /no/such/dir"}},
    ],
    [
        {"name": "mcp__demo__search_logs", "args": {"pattern": "test_"}},
        {"name": "slugify", "args": {"title": "Flaky test: test_upload_resumes fails"}},
    ],
    [{"name": "run_shell_command", "args": {"command": "echo done; exit 3"}}],
    "Found the flaky test; branch name chosen.",
]


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="toolbatch-example-"))
    registry = toolbatch.default_registry()
    registry.register(slugify)
    config = toolbatch.SchedulerConfig(
        batch_budget=12_000,
        artifacts_dir=workdir / "artifacts",
        mcp_servers={
            "mcpServers": {
                "demo": {
                    "command": sys.executable,
                    "args": ["-m", "toolbatch.cli._demo_mcp_server"],
                }
            }
        },
    )
    transcript = workdir / "session.jsonl"
    async with toolbatch.ToolScheduler(registry, config) as scheduler:
        loop = AgentLoop(
            ScriptedModel(SCRIPT), scheduler, recorder=toolbatch.JsonlRecorder(transcript)
        )
        outcome = await loop.prompt("Find out why CI is flaky.")
    for number, turn in enumerate(outcome.turns, start=1):
        used = response_text_length(turn.parts)
        print(f"turn {number}: {len(turn.responses)} call(s), {used:,} of 12,000 chars sent")
        for response in turn.responses:
            files = ", ".join(str(p) for p in response.persisted_output_files or ()) or "-"
            print(
                f"  {response.name:<24} {response.status:<8} "
                f"{response.content_length:>6,} chars  artifact: {files}"
            )
    print(f"model: {outcome.text}")
    print(f"transcript: {transcript}")


if __name__ == "__main__":
    toolbatch.configure_logging("warning")
    anyio.run(main)
