"""Headless means allow list (issue 28, item 7): `toolbatch run` and `serve` with settings.

With only ``Bash(git status:*)``, ``Bash(git diff:*)`` and ``Bash(ls:*)`` allowed and nobody
to ask, ``wget ... || echo 'not allowlisted but ran'`` is refused, the reason naming the
rules; the injected commands of issue 28 leave no marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import Service, invoke_toolbatch

ALLOWED = ["Bash(git status:*)", "Bash(git diff:*)", "Bash(ls:*)"]
WGET = "wget -q -O /dev/null http://127.0.0.1:9/ || echo 'not allowlisted but ran'"
INJECTED = {
    "process": "git status <(touch M1)",
    "ansi": "git status $'\\'' ; touch M2 ; echo $'\\''",
    "comment": "git status #'\ntouch M3\n#'",
}


def shell(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": command}}


def settings_file(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"permissions": {"allow": ALLOWED, **extra}}))
    return path


def check_refusals(by_id: dict[str, dict[str, Any]], settings: Path, work: Path) -> None:
    error = by_id["wget"]["error"]
    assert "not allowlisted but ran" not in json.dumps(by_id["wget"].get("output", ""))
    assert "no allow rule covers 'wget -q -O /dev/null http://127.0.0.1:9/'" in error
    assert "headless" in error
    for rule in ALLOWED:
        assert repr(rule) in error
    assert str(settings) in error
    assert "touch M1" not in by_id["process"]["error"]  # the reason: not a plain sequence
    assert "allow rules approve nothing else" in by_id["process"]["error"]
    assert "no allow rule covers 'touch M2'" in by_id["ansi"]["error"]  # seen as a command
    assert "(a comment)" in by_id["comment"]["error"]
    assert "output" in by_id["ls"], by_id["ls"]
    assert sorted(p.name for p in work.iterdir()) == ["settings.json"]


def test_run_refuses_what_no_allow_rule_covers(tmp_path: Path) -> None:
    """`toolbatch run --settings`: the allow list holds, headless."""
    settings = settings_file(tmp_path)
    batch = [
        shell("wget", WGET),
        *(shell(call_id, command) for call_id, command in INJECTED.items()),
        shell("ls", "ls -a"),
    ]
    done = invoke_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--output-format",
        "json",
        "--artifacts-dir",
        str(tmp_path.parent / f"{tmp_path.name}-artifacts"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    events = json.loads(done.stdout)
    parts = json.loads(next(e for e in events if e["type"] == "result")["result"])
    by_id = {p["functionResponse"]["id"]: p["functionResponse"]["response"] for p in parts}
    check_refusals(by_id, settings, tmp_path)


@pytest.mark.parametrize(
    ("mode", "ran"),
    [
        pytest.param("bypassPermissions", True, id="bypass"),
        pytest.param("dontAsk", False, id="dontAsk"),
    ],
)
def test_run_takes_the_permission_mode(tmp_path: Path, mode: str, ran: bool) -> None:
    """--permission-mode overrides defaultMode: bypassPermissions runs what no rule covers."""
    settings = settings_file(tmp_path, defaultMode="default")
    done = invoke_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--permission-mode",
        mode,
        "--output-format",
        "json",
        "--artifacts-dir",
        str(tmp_path.parent / f"{tmp_path.name}-artifacts"),
        stdin=json.dumps([shell("t", "touch made")]).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "made").exists() is ran


def test_a_bad_permission_mode_is_a_usage_error(tmp_path: Path) -> None:
    """Only Claude Code's mode names are taken."""
    done = invoke_toolbatch("run", "--permission-mode", "yolo", stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert "--permission-mode" in done.stderr.decode()


def test_serve_refuses_what_no_allow_rule_covers(tmp_path: Path) -> None:
    """`toolbatch serve --settings`: no approver, so the allow list holds."""
    settings = settings_file(tmp_path)
    service = Service(
        "--settings",
        str(settings),
        "--artifacts-dir",
        str(tmp_path.parent / f"{tmp_path.name}-artifacts"),
        cwd=tmp_path,
    )
    try:
        calls = [
            shell("wget", WGET),
            *(shell(call_id, command) for call_id, command in INJECTED.items()),
            shell("ls", "ls -a"),
        ]
        answer = service.call("batch/run", {"calls": calls, "budget": None})
        responses = answer["result"]["responses"]
        by_id = {r["call_id"]: r["parts"][0]["functionResponse"]["response"] for r in responses}
        check_refusals(by_id, settings, tmp_path)
        assert service.call("shutdown")["result"] == {}
        assert service.wait() == 0
    finally:
        service.stop()
