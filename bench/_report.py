"""One row of the benchmark table, and how the table, its summary and its chart are made.

A row's target is data (``Target``: a limit on its value or its ratio), so whether it was
met is computed, never typed in, and the chart can draw it. A row without a target is a
diagnostic: it explains another row and is neither met nor missed.

The terminal table marks a missed target so it stands out at a glance (``MISSED`` and a
``>>`` marker, in red when stdout is a terminal) and ends with one summary line; the
chart (``bench.png``) gives each targeted row its own linear axis from 0, with the target
drawn as a line, so 0.34 against a target of 0.5 looks as far off as it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias

Comparison: TypeAlias = Literal["<=", ">="]
Quantity: TypeAlias = Literal["value", "ratio"]
Status: TypeAlias = Literal["met", "missed", "diagnostic"]

MISSED_MARKER: Final = ">>"
AXIS_HEADROOM: Final = 1.25
"""Each chart axis runs from 0 to this much beyond the larger of the figure and its target."""
_RED: Final = "\x1b[1;31m"
_GREEN: Final = "\x1b[32m"
_RESET: Final = "\x1b[0m"


@dataclass(frozen=True, slots=True)
class Target:
    """A target: ``<on> <op> <limit>``, e.g. ``Target("ratio", ">=", 0.5)``.

    Attributes:
        on: which figure of the row it bounds: its ``value`` or its ``ratio``.
        op: ``<=`` (at most) or ``>=`` (at least).
        limit: the bound, in the figure's unit.
    """

    on: Quantity
    op: Comparison
    limit: float

    def met_by(self, measured: float) -> bool:
        """Whether ``measured`` is on the right side of the limit."""
        return measured <= self.limit if self.op == "<=" else measured >= self.limit


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
        goal: the target as data; ``None`` for a diagnostic row.
    """

    area: str
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float | None
    ratio: float | None
    target: str
    goal: Target | None = None

    @property
    def measured(self) -> float | None:
        """The figure the goal is stated on (``None`` for a diagnostic)."""
        if self.goal is None:
            return None
        return self.value if self.goal.on == "value" else self.ratio

    @property
    def status(self) -> Status:
        """``met``, ``missed`` or, without a goal, ``diagnostic``."""
        measured = self.measured
        if self.goal is None:
            return "diagnostic"
        if measured is None:
            return "missed"  # a target on a ratio the benchmark did not produce
        return "met" if self.goal.met_by(measured) else "missed"

    @property
    def meets(self) -> bool:
        """Whether nothing is missed (a diagnostic meets trivially)."""
        return self.status != "missed"

    @property
    def label(self) -> str:
        """``area: name``."""
        return f"{self.area}: {self.name}"


def _status_cell(row: Row, *, color: bool) -> str:
    text = {"met": "met", "missed": "MISSED", "diagnostic": "-"}[row.status]
    if not color or row.status == "diagnostic":
        return text
    return f"{_RED if row.status == 'missed' else _GREEN}{text}{_RESET}"


def format_table(rows: Sequence[Row], *, color: bool = False) -> str:
    """The rows as a fixed-width text table; a missed target's line starts with ``>>``.

    Args:
        rows: the rows, in the order to print.
        color: colour the status (red ``MISSED``, green ``met``); for a terminal only.
    """
    header = ("", "area", "benchmark", "value", "baseline (same run)", "ratio", "target", "status")
    lines = [header]
    for row in rows:
        base = row.baseline
        if row.baseline_value is not None:
            base = f"{row.baseline}: {row.baseline_value:,.3g} {row.unit}"
        lines.append(
            (
                MISSED_MARKER if row.status == "missed" else "",
                row.area,
                row.name,
                f"{row.value:,.4g} {row.unit}",
                base,
                "" if row.ratio is None else f"{row.ratio:.3g}",
                row.target,
                row.status,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        status = line[-1] if index == 0 else _status_cell(rows[index - 1], color=color)
        out.append("  ".join([*cells, status]).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def summarize(rows: Sequence[Row]) -> str:
    """One line: ``targets: N met, M missed (which)``, and how many rows are diagnostics."""
    met = [row for row in rows if row.status == "met"]
    missed = [row for row in rows if row.status == "missed"]
    diagnostics = len(rows) - len(met) - len(missed)
    line = f"targets: {len(met)} met, {len(missed)} missed"
    if missed:
        line += " (" + "; ".join(row.label for row in missed) + ")"
    if diagnostics:
        line += f"; {diagnostics} diagnostic row{'s' if diagnostics != 1 else ''} without a target"
    return line


@dataclass(frozen=True, slots=True)
class Bar:
    """One row of the chart: a bar from 0 to ``measured`` and a line at ``limit``."""

    label: str
    measured: float
    limit: float
    op: Comparison
    unit: str
    met: bool
    axis_max: float


def chart_bars(rows: Sequence[Row]) -> list[Bar]:
    """The chart's bars: one per row with a target, each on its own linear axis from 0."""
    bars = []
    for row in rows:
        measured, goal = row.measured, row.goal
        if goal is None or measured is None:
            continue
        top = max(measured, goal.limit, 0.0) * AXIS_HEADROOM or 1.0
        bars.append(
            Bar(
                label=row.label,
                measured=measured,
                limit=goal.limit,
                op=goal.op,
                unit=row.unit if goal.on == "value" else "ratio",
                met=row.status == "met",
                axis_max=top,
            )
        )
    return bars


def save(rows: Sequence[Row], directory: Path) -> list[Path]:
    """Write ``bench.json`` (and ``bench.png`` when matplotlib is installed)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "bench.json"
    records = [{**asdict(row), "status": row.status} for row in rows]
    json_path.write_text(json.dumps(records, indent=2) + "\n")
    written = [json_path]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    bars = chart_bars(rows)
    if not bars:
        return written
    fig, axes = plt.subplots(len(bars), 1, figsize=(10, 0.62 * len(bars) + 1.2), squeeze=False)
    for ax, bar in zip(axes[:, 0], bars, strict=True):
        ax.barh([0], [bar.measured], color="tab:green" if bar.met else "tab:red", height=0.6)
        ax.axvline(bar.limit, color="black", linestyle="--", linewidth=1.2)
        ax.set_xlim(0, bar.axis_max)
        ax.set_yticks([])
        ax.tick_params(axis="x", labelsize=7)
        verdict = "met" if bar.met else "MISSED"
        ax.set_title(
            f"{bar.label}: {bar.measured:,.3g} {bar.unit}, target {bar.op} {bar.limit:,.3g} "
            f"({verdict})",
            loc="left",
            fontsize=8,
            color="black" if bar.met else "tab:red",
        )
    fig.suptitle(
        "toolbatch benchmarks: each figure (bar) against its target (dashed line), linear axes"
    )
    fig.tight_layout()
    png_path = directory / "bench.png"
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    written.append(png_path)
    return written
