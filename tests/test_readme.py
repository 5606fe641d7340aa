"""The README's quickstart is real: it runs as written and does what the text says."""

from __future__ import annotations

import os
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


def _console_sessions() -> list[tuple[list[str], list[str]]]:
    """Each console block of the README that shows commands: its commands and shown output."""
    readme = (ROOT / "README.md").read_text()
    sessions = []
    for block in re.findall(r"```console\n(.*?)```", readme, re.S):
        lines = block.splitlines()
        commands = [line[2:] for line in lines if line.startswith("$ ")]
        if commands:
            shown = [line for line in lines if line.strip() and not line.startswith("$ ")]
            sessions.append((commands, shown))
    return sessions


def test_every_readme_command_runs_as_written_and_prints_what_it_shows(tmp_path: Path) -> None:
    """A newcomer's shell: each `$` line runs from the checkout (venv activation included)."""
    sessions = _console_sessions()
    assert sessions, "the README shows no commands to run"
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # a fresh shell: .venv is not on PATH yet
    env["TOOLBATCH_STATE_DIR"] = str(tmp_path / "state")
    for commands, shown in sessions:
        runnable = [command for command in commands if not command.startswith("make ")]
        script = "set -euo pipefail\n" + "\n".join(runnable) + "\n"
        done = subprocess.run(
            ["bash", "-c", script],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
            env=env,
            check=False,
        )
        assert done.returncode == 0, f"{runnable}\n{done.stdout}\n{done.stderr}"
        if all("toolbatch " in command for command in runnable):
            # A toolbatch example shows every line it prints, nothing left out.
            printed = [line for line in done.stdout.splitlines() if line.strip()]
            assert printed == shown, f"the README shows {shown!r}; the command printed:\n" + (
                done.stdout
            )
        for line in shown:
            assert line in done.stdout, f"the README shows {line!r}; the commands printed:\n" + (
                done.stdout
            )
