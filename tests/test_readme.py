"""The README's quickstart is real: it runs as written and does what the text says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Quickstart section has no python block"
    return match.group(1)


def test_quickstart_runs_and_prints_what_the_readme_says(tmp_path: Path) -> None:
    """The quickstart exits 0; c1 is persisted and previewed, c2 answers, c3 is an error."""
    script = tmp_path / "quickstart.py"
    script.write_text(_quickstart())
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("c")]
    c1, c2, c3 = (line.split(" ") for line in lines)
    assert c1[:2] == ["c1", "success"]
    assert 3_000 < int(c1[2]) <= 10_000
    assert c2[:2] == ["c2", "success"]
    assert c3[:2] == ["c3", "error"]


def test_readme_names_the_two_commands() -> None:
    """The first screen names both commands."""
    head = (ROOT / "README.md").read_text()[:2500]
    assert "make demo" in head
    assert "make test" in head
