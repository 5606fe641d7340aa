"""``make chaos``: a seeded, bounded fault campaign against the real scheduler.

``python -m bench.chaos [--seed N] [--batches N | --cover N | --indices I [I ...]] [--keep]
[--verbose]`` runs N batches (default 500), or the few of the first N that together inject
every fault kind those N do (``--cover``, what ``tests/test_chaos.py`` runs), or the
batches numbered (``--indices 121 135``: failures again, alone), of real shell commands,
MCP calls to the test server, custom tools, hooks and artifact-store faults, checks every
invariant after each batch, prints a table, and exits 1 if any violation counter is above
zero (2 if the campaign could not run).

Reproducibility: the same seed gives the same batches and faults (the table's plan digest
shows it). Outcomes that depend on timing can differ between runs: which calls an abort
or a caller's cancellation catches, whether a slow call beats its timeout on a loaded
machine, and so which artifacts get written.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import anyio

from bench._chaos_plan import covering_batches
from bench._chaos_run import VIOLATIONS, CampaignOptions, CampaignReport, run_campaign

WIDTH = 78


def _line(label: str, value: object) -> str:
    shown = f"{value:,}" if isinstance(value, int) else str(value)
    return f"  {label:<{WIDTH - 12}}{shown:>10}"


def format_report(report: CampaignReport) -> str:
    """The campaign's table: violations, totals, faults injected, and what went wrong."""
    options = report.options
    lines = [
        f"toolbatch chaos campaign: seed {options.seed}, {report.totals['batches']:,} batches, "
        f"{report.seconds:.1f} s (plan digest {report.plan_digest})",
        "",
        "violations (each must be 0)",
    ]
    if options.indices is not None:
        lines[1:1] = [f"batches run: {', '.join(map(str, options.indices))}"]
    lines += [_line(text, report.violations[key]) for key, text in VIOLATIONS.items()]
    lines += ["", "totals"]
    lines += [_line(name, value) for name, value in sorted(report.totals.items())]
    lines += ["", "faults and behaviours injected, by kind"]
    lines += [_line(kind, count) for kind, count in sorted(report.faults.items()) if count]
    if report.skipped:
        lines += ["", "fault kinds not injected on this machine"]
        lines += [f"  {kind}: {why}" for kind, why in sorted(report.skipped.items())]
    if report.warnings:
        lines += ["", "toolbatch warnings logged, by event"]
        lines += [_line(event, count) for event, count in report.warnings.most_common()]
    failing = [key for key in VIOLATIONS if report.violations[key]]
    if failing:
        lines += ["", "details (the first few of each)"]
        for key in failing:
            lines.append(f"  {VIOLATIONS[key]}:")
            lines += [f"    {detail[:300]}" for detail in report.details[key]]
    verdict = f"FAIL: {len(failing)} counter(s) above zero" if failing else "PASS"
    lines += ["", f"result: {verdict}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    runs = parser.add_mutually_exclusive_group()
    runs.add_argument("--batches", type=int, default=500, help="batches to run (default 500)")
    runs.add_argument(
        "--cover",
        type=int,
        metavar="N",
        help="run only the few of the first N batches that inject every fault kind they do",
    )
    runs.add_argument(
        "--indices",
        type=int,
        nargs="+",
        metavar="I",
        help="run only these batch numbers (as a failure's details name them)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="where to make the work directory (default: the temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep artifacts and transcripts")
    parser.add_argument("--verbose", action="store_true", help="one line per batch, warnings")
    args = parser.parse_args(argv)
    if args.batches < 1:
        parser.error(f"--batches must be at least 1, got {args.batches}")
    if args.cover is not None and args.cover < 1:
        parser.error(f"--cover must be at least 1 batch, got {args.cover}")
    if args.indices is not None and min(args.indices) < 0:
        parser.error(f"--indices are batch numbers >= 0, got {min(args.indices)}")
    indices = None if args.cover is None else covering_batches(args.seed, search=args.cover)
    if args.indices is not None:
        indices = tuple(dict.fromkeys(args.indices))
    options = CampaignOptions(
        seed=args.seed,
        batches=args.batches,
        indices=indices,
        work_dir=args.work_dir,
        keep=args.keep,
        verbose=args.verbose,
    )
    try:
        report = anyio.run(run_campaign, options)
        if options.keep:
            print(f"work directory kept: {report.work_dir}", file=sys.stderr)
    except Exception as exc:  # the campaign could not run: say why, distinctly from a FAIL
        traceback.print_exc()  # a harness bug or a crash that escaped: show where
        print(f"chaos campaign could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
