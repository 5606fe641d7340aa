"""An agent loop against the OpenAI Responses API (needs ``pip install 'toolbatch[openai]'``).

Run it: ``OPENAI_API_KEY=... OPENAI_MODEL=gpt-5-mini python examples/openai_responses_loop.py
"PROMPT"`` (``OPENAI_BASE_URL`` points it at another server).

The model gets the built-in shell tool and a custom tool, may call several in parallel, and
every batch it receives is finalized (bounded, persisted once) and recorded to a transcript
before it is sent as ``function_call_output`` items (images inside them, audio and oversized
images as references to the saved file). The transcript path is printed at the end; ``--resume
PATH`` continues it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

import toolbatch
from toolbatch.agent import AgentLoop, OpenAIResponsesModel, history_from_transcript

SYSTEM = "You are a careful coding agent. Use tools when useful."


@toolbatch.tool(read_only=True)
def word_count(text: str) -> str:
    """Count the words in a text.

    Args:
        text: the text to count.
    """
    return str(len(text.split()))


async def main(prompt: str, resume: Path | None, budget: int) -> int:
    transcript = resume or Path(tempfile.mkdtemp(prefix="toolbatch-responses-")) / "session.jsonl"
    registry = toolbatch.default_registry()
    registry.register(word_count)
    history = history_from_transcript(transcript) if resume else []
    config = toolbatch.SchedulerConfig(batch_budget=budget)
    async with (
        OpenAIResponsesModel(system=SYSTEM) as model,
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
        print(f"openai_responses_loop: {exc}", file=sys.stderr)
        sys.exit(2)
