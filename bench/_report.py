"""One row of the benchmark table, and how the table is printed and saved."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Row:
    """One benchmark figure with its side-by-side comparison and its target.

    Attributes:
        area: the issue area (``finalize``, ``shell``, ``mcp``, ``scheduler``, ...).
        name: what was measured, in a few words.
        value: the figure itself.
        unit: the figure's unit (``ms``, ``µs/call``, ``MB/s``, ``MiB``).
        baseline: what it was compared with in the same run, in words.
        baseline_value: the comparison's figure, in the same unit (``None`` if not one).
        ratio: the ratio the target is stated in (how it is computed is in ``target``).
        target: the target in words, e.g. ``ratio >= 0.5 (ours/baseline throughput)``.
        meets: whether the target was met.
    """

    area: str
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float | None
    ratio: float | None
    target: str
    meets: bool


def format_table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table."""
    header = ("area", "benchmark", "value", "baseline (same run)", "ratio", "target", "ok")
    lines = [header]
    for row in rows:
        base = row.baseline
        if row.baseline_value is not None:
            base = f"{row.baseline}: {row.baseline_value:,.3g} {row.unit}"
        lines.append(
            (
                row.area,
                row.name,
                f"{row.value:,.4g} {row.unit}",
                base,
                "" if row.ratio is None else f"{row.ratio:.3g}",
                row.target,
                "yes" if row.meets else "NO",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def save(rows: list[Row], directory: Path) -> list[Path]:
    """Write ``bench.json`` (and ``bench.png`` when matplotlib is installed)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "bench.json"
    json_path.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    written = [json_path]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    ratios = [r for r in rows if r.ratio is not None]
    if not ratios:
        return written
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(ratios) + 1.5))
    labels = [f"{r.area}: {r.name}" for r in ratios]
    colors = ["tab:green" if r.meets else "tab:red" for r in ratios]
    ax.barh(labels, [r.ratio for r in ratios], color=colors)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ratio (see target column; green = target met)")
    fig.suptitle("toolbatch benchmarks, each beside its comparison in one run")
    fig.tight_layout()
    png_path = directory / "bench.png"
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    written.append(png_path)
    return written
