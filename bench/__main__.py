"""Run every benchmark module and print one table (``make bench``)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path

from bench._report import Row, format_table, save, summarize
from toolbatch import configure_logging


def _modules() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        info.name for info in pkgutil.iter_modules([str(here)]) if info.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", nargs="*", help="run only these areas (module suffixes)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    configure_logging("error")
    rows: list[Row] = []
    failed: list[str] = []
    for name in _modules():
        area = name.removeprefix("bench_")
        if args.only and area not in args.only:
            continue
        started = time.perf_counter()
        print(f"[bench] {area} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
            rows.extend(module.run(quick=args.quick))
        except Exception as exc:  # a broken benchmark is reported, the others still run
            failed.append(f"{area}: {type(exc).__name__}: {exc}")
        print(
            f"[bench] {area} done in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    print(format_table(rows, color=sys.stdout.isatty()))
    for path in save(rows, args.out):
        print(f"wrote {path}")
    for failure in failed:
        print(f"benchmark failed: {failure}", file=sys.stderr)
    print(summarize(rows))  # last, where the eye lands
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
