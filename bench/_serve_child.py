"""A child process for the service's memory row: ``toolbatch serve``'s loop over a trivial
tool (``serve``), or the same batch through ``run_batch`` alone (``direct``).

Run as ``python -m bench._serve_child serve|direct``: it reads one ``batch/run`` line (serve)
or one batch document (direct) from stdin, answers on stdout, and writes its peak RSS in
KiB (``VmHWM``) as the last line of stderr when it ends. Not ``ru_maxrss``: Linux carries
that across exec from the forked parent, so a child of a large benchmark process would
report the parent's size.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import anyio

import toolbatch
from toolbatch import BatchObserver, Registry, SchedulerConfig, ToolCall, ToolScheduler, Turn, tool
from toolbatch.finalize import DEFAULT_BATCH_BUDGET_CHARS
from toolbatch.service import parse_batch, serve


@tool
async def noop() -> str:
    """Answer "ok"."""
    return "ok"


class _Backend:
    def __init__(self, scheduler: ToolScheduler) -> None:
        self._scheduler = scheduler

    @property
    def default_budget(self) -> int | None:
        return self._scheduler.config.budget

    def declarations(self) -> Sequence[toolbatch.ToolDeclaration]:
        return self._scheduler.declarations()

    async def run_batch(
        self,
        calls: Sequence[ToolCall],
        /,
        *,
        budget: int | None,
        abort: anyio.Event,
        observer: BatchObserver,
    ) -> Turn:
        return await self._scheduler.run_batch(calls, abort=abort, observer=observer, budget=budget)


def peak_rss_kib() -> int:
    """This process's peak resident set since its exec (``VmHWM``), in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


async def main(mode: str) -> None:
    # "serve-budgeted": the session's default budget (what `toolbatch serve` runs with);
    # "serve" and "direct": no budget (issue 18's rows).
    budgeted = mode == "serve-budgeted"
    config = SchedulerConfig(batch_budget=DEFAULT_BATCH_BUDGET_CHARS if budgeted else None)
    async with ToolScheduler(Registry([noop]), config) as scheduler:
        if mode.startswith("serve"):
            await serve(_Backend(scheduler), input_fd=0, output_fd=1)
        else:
            batch = parse_batch(json.loads(sys.stdin.buffer.read())["params"])
            turn = await scheduler.run_batch(batch.tool_calls(), budget=None)
            sys.stdout.write(f"{len(turn.responses)}\n")


if __name__ == "__main__":
    toolbatch.configure_logging("error")
    anyio.run(main, sys.argv[1])
    sys.stderr.write(f"{peak_rss_kib()}\n")
