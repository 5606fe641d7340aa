"""A custom producer and a custom @tool, run as one batch.

Run it: ``python examples/custom_producer.py [DIRECTORY]``

It shows the two ways to add a tool:

* ``@toolbatch.tool`` on a typed function: arguments are validated from the signature, the
  docstring becomes the description, and output over ``output_threshold`` characters is
  persisted once and previewed.
* a ``Producer``: any object with a ``declaration`` (name, description, JSON schema) and an
  ``async def run(call, context) -> ToolResult``. It decides its own persistence: here it
  streams a large listing into the artifact store itself and says so with
  ``persisted_output_files``, so no later layer writes it again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import anyio.to_thread

import toolbatch
from toolbatch.producers import ProducerContext, ToolDeclaration


@toolbatch.tool(read_only=True)
def count_lines(path: str) -> str:
    """Count the lines of a text file.

    Args:
        path: the file to count.
    """
    with open(path, "rb") as handle:
        return f"{path}: {sum(1 for _ in handle)} lines"


def _files_under(root: str) -> list[str] | None:
    if not os.path.isdir(root):
        return None
    return sorted(str(p) for p in Path(root).rglob("*") if p.is_file())


class TreeProducer:
    """Lists every file under a directory; long listings go to an artifact, once."""

    preview_lines = 20  # it bounds its own output: its declaration has no output_threshold

    @property
    def declaration(self) -> ToolDeclaration:
        return ToolDeclaration(
            name="list_tree",
            description="List every file under a directory, one path per line.",
            input_schema={
                "type": "object",
                "properties": {"root": {"type": "string", "description": "the directory"}},
                "required": ["root"],
                "additionalProperties": False,
            },
            read_only=True,
        )

    async def run(self, call: toolbatch.ToolCall, context: ProducerContext) -> toolbatch.ToolResult:
        root = call.args.get("root")
        if not isinstance(root, str):
            return toolbatch.ToolResult.failure(
                f"root must be a directory path, got {root!r}", type="invalid_args"
            )
        # Walking a tree blocks: do it in a worker thread, not on the event loop.
        paths = await anyio.to_thread.run_sync(_files_under, root)
        if paths is None:
            return toolbatch.ToolResult.failure(
                f"root must be an existing directory, got {root!r}", type="invalid_args"
            )
        listing = "\n".join(paths)
        if len(paths) <= self.preview_lines or context.store is None:
            return toolbatch.ToolResult(content=listing or "(no files)")
        artifact = await context.store.persist(call.id, call.name, listing)
        preview = "\n".join(paths[: self.preview_lines])
        return toolbatch.ToolResult(
            content=f"{len(paths)} files; first {self.preview_lines}:\n{preview}\n"
            f"Full listing: {artifact}",
            display=listing,
            persisted_output_files=(artifact,),
        )


async def main(root: str) -> None:
    registry = toolbatch.Registry([count_lines, TreeProducer()])
    config = toolbatch.SchedulerConfig(batch_budget=3_000)
    calls = [
        toolbatch.ToolCall(id="t1", name="list_tree", args={"root": root}),
        toolbatch.ToolCall(id="t2", name="count_lines", args={"path": __file__}),
        toolbatch.ToolCall(id="t3", name="count_lines", args={"path": 42}),
    ]
    async with toolbatch.ToolScheduler(registry, config) as scheduler:
        turn = await scheduler.run_batch(calls)
    for response in turn.responses:
        files = response.persisted_output_files or ()
        print(f"== {response.name} [{response.call_id}] {response.status}")
        print(
            f"   model sees {response.content_length} chars; artifacts: {[str(f) for f in files]}"
        )
        if response.error:
            print(f"   error: {response.error}")
    total = sum(r.content_length for r in turn.responses)
    print(f"batch total {total} chars within budget {config.batch_budget}")


if __name__ == "__main__":
    toolbatch.configure_logging("warning")
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent.parent))
