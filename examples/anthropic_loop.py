"""An agent loop against the Anthropic Messages API (needs ``pip install 'toolbatch[anthropic]'``).

Run it: ``ANTHROPIC_API_KEY=... ANTHROPIC_MODEL=claude-sonnet-4-5 python examples/anthropic_loop.py
"PROMPT"`` (``ANTHROPIC_BASE_URL`` points it at another server or a proxy).

The model gets the built-in shell tool and a custom tool, may call several in parallel, and
every batch it receives is finalized (bounded, persisted once) and recorded to a transcript
before it is sent as ``tool_result`` blocks (images inside them, audio and oversized images
as references to the saved file). The transcript path is printed at the end; ``--resume
PATH`` continues it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

import toolbatch
from toolbatch.agent import AgentLoop, AnthropicModel, history_from_transcript

SYSTEM = "You are a careful coding agent. Use tools when useful."


@toolbatch.tool(read_only=True)
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: the text to count.
    """
    return str(len(text.split()))


async def main(prompt: str, resume: Path | None, budget: int) -> int:
    transcript = resume or Path(tempfile.mkdtemp(prefix="toolbatch-anthropic-")) / "session.jsonl"
    registry = toolbatch.default_registry()
    registry.register(word_count)
    history = history_from_transcript(transcript) if resume else []
    config = toolbatch.SchedulerConfig(batch_budget=budget)
    async with (
        AnthropicModel(system=SYSTEM) as model,
        toolbatch.ToolScheduler(registry, config) as scheduler,
    ):
        loop = AgentLoop(
            model, scheduler, recorder=toolbatch.JsonlRecorder(transcript), history=history
        )
        outcome = await loop.prompt(prompt)
    print(outcome.text)
    print(
        f"[{len(outcome.turns)} tool turn(s), stop: {outcome.stop_reason}, "
        f"transcript: {transcript}]",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    toolbatch.configure_logging("warning")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--resume", type=Path, help="continue this transcript")
    parser.add_argument("--budget", type=int, default=200_000, help="tool-output budget")
    args = parser.parse_args()
    try:
        sys.exit(anyio.run(main, args.prompt, args.resume, args.budget))
    except toolbatch.ToolbatchError as exc:
        print(f"anthropic_loop: {exc}", file=sys.stderr)
        sys.exit(2)
