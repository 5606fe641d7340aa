"""``make bench``'s report, from fixed rows (no benchmark runs): misses stand out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench._report import MISSED_MARKER, Row, Target, chart_bars, format_table, save, summarize


def row(
    name: str, value: float, ratio: float | None, goal: Target | None, area: str = "shell"
) -> Row:
    return Row(
        area=area,
        name=name,
        value=value,
        unit="MiB/s",
        baseline="cat",
        baseline_value=1_000.0,
        ratio=ratio,
        target="see goal" if goal else "diagnostic",
        goal=goal,
    )


ROWS = [
    row("tmpfs", 420.0, 0.42, Target("ratio", ">=", 0.5)),
    row("disk", 560.0, 0.56, Target("ratio", ">=", 0.5)),
    row("rss", 36.0, None, Target("value", "<=", 64.0)),
    row("no fsync", 430.0, 0.43, None, area="finalize"),
    row("persist", 340.0, 0.34, Target("ratio", ">=", 0.5), area="finalize"),
]


def test_status_is_computed_from_the_goal() -> None:
    """met, missed, or diagnostic when a row has no target."""
    assert [r.status for r in ROWS] == ["missed", "met", "met", "diagnostic", "missed"]
    assert Target("value", "<=", 64).met_by(64)
    assert not Target("ratio", ">=", 0.5).met_by(0.4999)


def test_a_missed_target_stands_out_in_the_table() -> None:
    """Missed lines start with a marker and say MISSED; met and diagnostic lines do not."""
    lines = format_table(ROWS).split("\n")
    body = lines[2:]
    assert lines[0].split()[-1] == "status"
    flagged = [line for line in body if line.startswith(MISSED_MARKER)]
    assert len(flagged) == 2
    assert all(line.endswith("MISSED") for line in flagged)
    assert [line.split()[-1] for line in body] == ["MISSED", "met", "met", "-", "MISSED"]
    assert "\x1b[" not in format_table(ROWS)


def test_colour_only_when_asked() -> None:
    """For a terminal: MISSED in bold red, met in green, columns unchanged."""
    coloured = format_table(ROWS, color=True).split("\n")
    assert coloured[2].endswith("\x1b[1;31mMISSED\x1b[0m")
    assert coloured[3].endswith("\x1b[32mmet\x1b[0m")
    assert coloured[5].endswith("-")


def test_the_summary_counts_and_names_the_misses() -> None:
    """One line at the end: how many met, how many missed and which."""
    assert summarize(ROWS) == (
        "targets: 2 met, 2 missed (shell: tmpfs; finalize: persist); "
        "1 diagnostic row without a target"
    )
    assert summarize(ROWS[1:3]) == "targets: 2 met, 0 missed"


def test_the_chart_puts_each_figure_beside_its_target_on_a_linear_axis() -> None:
    """One bar per targeted row, from 0, the target as a line; diagnostics left out."""
    bars = chart_bars(ROWS)
    assert [bar.label for bar in bars] == [
        "shell: tmpfs",
        "shell: disk",
        "shell: rss",
        "finalize: persist",
    ]
    tmpfs, disk, rss, persist = bars
    assert (tmpfs.measured, tmpfs.limit, tmpfs.op, tmpfs.met) == (0.42, 0.5, ">=", False)
    assert tmpfs.axis_max == pytest.approx(0.625)  # 0 .. 1.25 x the target: honest distances
    assert persist.measured / persist.axis_max == pytest.approx(0.544)
    assert (rss.unit, rss.measured, rss.limit, rss.met) == ("MiB/s", 36.0, 64.0, True)
    assert disk.met


def test_save_writes_the_rows_with_their_status(tmp_path: Path) -> None:
    """bench.json carries each row, its goal and its status (and the chart, if it can)."""
    written = save(ROWS, tmp_path)
    records = json.loads((tmp_path / "bench.json").read_text())
    assert [r["status"] for r in records] == ["missed", "met", "met", "diagnostic", "missed"]
    assert records[0]["goal"] == {"on": "ratio", "op": ">=", "limit": 0.5}
    assert records[3]["goal"] is None
    assert written[0] == tmp_path / "bench.json"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert written[1] == tmp_path / "bench.png"
    assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")
