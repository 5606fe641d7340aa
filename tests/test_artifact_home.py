"""The artifacts' home: one folder per session in the per-user state dir, swept by age."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import structlog

import toolbatch
from tests.cli._support import invoke_toolbatch, run_toolbatch
from toolbatch.artifacts._home import (
    LOCK_NAME,
    SESSION_MAX_AGE_S,
    STATE_DIR_ENV,
    artifact_session,
    list_sessions,
    remove_sessions,
    sessions_dir,
    state_dir,
)
from toolbatch.errors import ConfigError

OLD_S = SESSION_MAX_AGE_S + 3600


def age(folder: Path, seconds: float) -> None:
    """Date the folder and everything in it ``seconds`` back."""
    then = time.time() - seconds
    for path in [folder, *folder.iterdir()]:
        os.utime(path, (then, then), follow_symlinks=False)


def closed_session(name: str, *, files: int = 1, age_s: float = 0) -> Path:
    """A session folder that was used and closed, with ``files`` artifacts."""
    with artifact_session(name) as folder:
        for index in range(files):
            (folder / f"out-{index}.txt").write_text("x" * 100)
    if age_s:
        age(folder, age_s)
    return folder


@contextmanager
def live_in_another_process(name: str) -> Iterator[Path]:
    """A real process that holds session ``name`` open until the block ends."""
    code = (
        "import sys\n"
        "from toolbatch.artifacts._home import artifact_session\n"
        f"with artifact_session({name!r}) as folder:\n"
        "    (folder / 'kept.txt').write_text('kept')\n"
        "    print(folder, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            yield Path(proc.stdout.readline().strip())
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)


# -- where -----------------------------------------------------------------------------------


def test_the_state_dir_follows_the_override_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """TOOLBATCH_STATE_DIR wins; else an absolute XDG_STATE_HOME; else ~/.local/state."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "override"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "override"
    monkeypatch.delenv(STATE_DIR_ENV)
    assert state_dir() == tmp_path / "xdg" / "toolbatch"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert state_dir() == tmp_path / "home" / ".local" / "state" / "toolbatch"


def test_the_state_dir_is_private_and_a_too_open_one_is_narrowed(state_dir: Path) -> None:
    """The state dir and sessions/ are 0700; one left 0755 is set back to 0700."""
    sessions = sessions_dir()
    assert sessions == state_dir / "sessions"
    for directory in (state_dir, sessions):
        assert directory.stat().st_mode & 0o777 == 0o700
    sessions.chmod(0o755)
    sessions_dir()
    assert sessions.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_state_dir_owned_by_someone_else_is_refused_and_sessions_fall_back(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Another user's state dir is never written: a clear error, and a temp dir instead."""
    os.chown(state_dir, 65534, 65534)
    with pytest.raises(ConfigError, match="belongs to uid 65534") as raised:
        sessions_dir()
    assert STATE_DIR_ENV in str(raised.value)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with structlog.testing.capture_logs() as logs, artifact_session("s") as folder:
        assert folder.parent == tmp_path
        assert folder.name.startswith("toolbatch-artifacts-")
    assert [entry["event"] for entry in logs] == ["artifacts.home_unavailable"]
    assert list(state_dir.iterdir()) == []


# -- the scheduler's default store -------------------------------------------------------------


async def test_a_scheduler_without_artifacts_dir_keeps_output_in_its_session_folder(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Output goes to sessions/<session id>/, stays after the session, and nothing to /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    config = toolbatch.SchedulerConfig(batch_budget=2_000, session_id="chat/42")
    call = toolbatch.ToolCall(id="c1", name="run_shell_command", args={"command": "seq 1 50000"})
    async with toolbatch.ToolScheduler(toolbatch.default_registry(), config) as scheduler:
        assert scheduler.store.root == state_dir / "sessions" / "chat_42"
        turn = await scheduler.run_batch([call])
        [artifact] = turn.responses[0].persisted_output_files or ()
        assert [session.live for session in list_sessions()] == [True]
    assert artifact.parent == state_dir / "sessions" / "chat_42"
    assert artifact.read_text().count("\n") == 50_000
    [session] = list_sessions()
    assert (session.id, session.files, session.live) == ("chat_42", 1, False)
    assert list((tmp_path / "tmp").iterdir()) == []


async def test_sessions_without_an_id_get_their_own_folders_and_empty_ones_leave_none(
    state_dir: Path,
) -> None:
    """Two id-less sessions get two folders; a session that wrote nothing leaves nothing."""
    registry = toolbatch.default_registry()
    big = toolbatch.ToolCall(id="b", name="run_shell_command", args={"command": "seq 1 50000"})
    roots = []
    for _ in range(2):
        async with toolbatch.ToolScheduler(registry) as scheduler:
            roots.append(scheduler.store.root)
            await scheduler.run_batch([big])
    async with toolbatch.ToolScheduler(registry) as scheduler:
        await scheduler.run_batch([toolbatch.ToolCall(id="s", name="run_shell_command")])
    assert len(set(roots)) == 2
    assert sorted(path.name for path in (state_dir / "sessions").iterdir()) == sorted(
        root.name for root in roots
    )


# -- lifecycle --------------------------------------------------------------------------------


def test_opening_a_session_removes_expired_closed_ones_only() -> None:
    """A new session sweeps folders unused for 7 days; younger ones stay."""
    expired = closed_session("expired", age_s=OLD_S)
    recent = closed_session("recent", age_s=SESSION_MAX_AGE_S - 3600)
    with artifact_session("new") as folder:
        (folder / "x.txt").write_text("x")
    assert not expired.exists()
    assert recent.exists()
    assert {session.id for session in list_sessions()} == {"recent", "new"}


def test_a_live_session_is_never_swept_however_old() -> None:
    """A session held open by another process keeps its folder past the max age."""
    with live_in_another_process("long-lived") as folder:
        age(folder, 10 * SESSION_MAX_AGE_S)
        with artifact_session("newcomer"):
            pass
        removed, kept = remove_sessions(older_than_s=None)
        assert (folder / "kept.txt").read_text() == "kept"
        assert [session.id for session in list_sessions()] == ["long-lived"]
        assert list_sessions()[0].live
        assert (removed, kept) == ([], ["long-lived"])
    assert not list_sessions()[0].live
    removed, kept = remove_sessions(older_than_s=None)
    assert [session.id for session in removed] == ["long-lived"]
    assert not folder.exists()


def test_reopening_a_session_keeps_its_files_and_renews_its_age() -> None:
    """The same session id opens the same folder; closing it dates it now."""
    folder = closed_session("again", age_s=SESSION_MAX_AGE_S - 60)
    with artifact_session("again") as reopened:
        assert reopened == folder
        assert (folder / "out-0.txt").exists()
    [session] = list_sessions()
    assert time.time() - session.last_used < 60
    assert (folder / LOCK_NAME).exists()


def test_remove_sessions_by_age_reports_what_it_freed() -> None:
    """clean --older-than: only sessions unused that long go; their sizes are reported."""
    closed_session("day-old", files=2, age_s=86400 + 60)
    closed_session("hour-old", files=1, age_s=3600)
    removed, kept = remove_sessions(older_than_s=86400)
    assert [(s.id, s.files, s.size_bytes) for s in removed] == [("day-old", 2, 200)]
    assert kept == []
    assert [session.id for session in list_sessions()] == ["hour-old"]
    with pytest.raises(ConfigError, match="got -1"):
        remove_sessions(older_than_s=-1)


def test_listing_without_a_state_dir_creates_nothing(state_dir: Path) -> None:
    """list on a fresh machine shows no session and makes no directory."""
    state_dir.rmdir()
    assert list_sessions() == []
    assert not state_dir.exists()


# -- toolbatch artifacts ---------------------------------------------------------------------


def test_the_artifacts_command_lists_and_cleans(state_dir: Path) -> None:
    """list shows each session with files, size, age and live; clean never removes a live one."""
    closed_session("finished", files=3, age_s=2 * 86400)
    with live_in_another_process("running"):
        listed = run_toolbatch("artifacts", "list")
        assert listed.returncode == 0, listed.stderr.decode()
        lines = listed.stdout.decode().splitlines()
        assert lines[0].startswith(f"{state_dir / 'sessions'}: 2 sessions, ")
        assert "removed 7 days after its last use" in lines[0]
        assert lines[1].split() == ["finished", "3", "files", "300", "B", "2d", "ago"]
        assert lines[2].split()[:3] == ["running", "1", "file"]
        assert lines[2].endswith("live")

        fresh = run_toolbatch("artifacts", "clean")
        assert fresh.stdout.decode() == f"removed 0 sessions from {state_dir / 'sessions'}, 0 B\n"
        by_age = run_toolbatch("artifacts", "clean", "--older-than", "1d")
        assert by_age.stdout.decode().startswith("removed 1 session from ")
        everything = run_toolbatch("artifacts", "clean", "--all")
        assert everything.stdout.decode().endswith(", 0 B; kept 1 live session\n")
        assert [session.id for session in list_sessions()] == ["running"]


@pytest.mark.parametrize("bad", ["7", "3x", "-1d", "d", "nanh"])
def test_a_bad_duration_is_a_usage_error(bad: str) -> None:
    """--older-than needs a number and a unit; anything else exits 2 and says so."""
    done = invoke_toolbatch("artifacts", "clean", f"--older-than={bad}")
    assert done.returncode == 2
    assert "such as 12h or 7d" in done.stderr.decode()
    assert done.stdout == b""
