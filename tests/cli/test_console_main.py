"""The ``toolbatch`` script ends its process without the interpreter's teardown
(``toolbatch.cli.console_main``): what a normal exit does for the user still happens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import atexit, sys
from pathlib import Path
atexit.register(lambda: Path(sys.argv[1]).write_text("exit handlers ran"))
sys.stdout.write("buffered, not flushed: ")
from toolbatch.cli import console_main
console_main(sys.argv[2:])
raise SystemExit("console_main returned")
"""


def _console(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "atexit.txt"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def test_exit_handlers_run_and_buffered_output_is_written(tmp_path: Path) -> None:
    done = _console(tmp_path, "run", "-", stdin="[]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("buffered, not flushed: 0 calls: 0 of 200,000 characters")
    assert (tmp_path / "atexit.txt").read_text() == "exit handlers ran"
    assert "console_main returned" not in done.stderr


def test_the_exit_code_is_the_commands(tmp_path: Path) -> None:
    done = _console(tmp_path, "run", str(tmp_path / "missing.json"))
    assert done.returncode == 2
    assert "missing.json" in done.stderr
    assert (tmp_path / "atexit.txt").read_text() == "exit handlers ran"
