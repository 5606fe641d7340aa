"""Issue 29, item 4: the files toolbatch writes for the user (the transcript, the dual
output) are opened once, never through a symlink, made 0600, and written only through the
descriptor opened first; a file replaced underneath is reported and nothing is written
anywhere."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.cli._support import run_toolbatch
from toolbatch import JsonlRecorder, SchedulerConfig, ToolCall, ToolScheduler, default_registry
from toolbatch.errors import RecorderError
from toolbatch.recorder import load_session

VICTIM_TEXT = b"the victim's own bytes\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(VICTIM_TEXT)
    return victim


async def test_a_command_that_swaps_the_transcript_for_a_symlink_gets_nothing_written(
    tmp_path: Path,
) -> None:
    """The next turn raises RecorderError naming the swap; the symlink's target is
    untouched and the real transcript keeps every turn recorded before."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    victim = _victim(tmp_path)
    transcript = workspace / "session.jsonl"
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts",
        recorder=JsonlRecorder(transcript),
        workspace_roots=[workspace],
    )
    swap = f"mv session.jsonl kept.jsonl && ln -s {victim} session.jsonl"
    async with ToolScheduler(default_registry(), config) as scheduler:
        await scheduler.run_batch(
            [ToolCall(id="c1", name="run_shell_command", args={"command": "echo first"})]
        )
        with pytest.raises(RecorderError, match="is now a symlink") as raised:
            await scheduler.run_batch(
                [
                    ToolCall(
                        id="c2",
                        name="run_shell_command",
                        args={"command": f"cd {workspace} && {swap} && echo '$(touch pwned)'"},
                    )
                ]
            )
    assert raised.value.turn is not None
    assert victim.read_bytes() == VICTIM_TEXT
    assert not (workspace / "pwned").exists()
    [entry] = load_session(workspace / "kept.jsonl")
    assert "first" in str(entry.parts)


async def test_an_existing_transcript_is_made_0600_and_a_symlink_is_refused(
    tmp_path: Path,
) -> None:
    """A 0644 transcript becomes 0600; a transcript path that is a symlink is refused."""
    existing = tmp_path / "old.jsonl"
    existing.write_bytes(b"")
    existing.chmod(0o644)
    await JsonlRecorder(existing).record_message("user", [])
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    victim = _victim(tmp_path)
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    with pytest.raises(RecorderError, match="symlink"):
        await JsonlRecorder(link).record_message("user", [])
    assert victim.read_bytes() == VICTIM_TEXT


def _batch(tmp_path: Path, command: str = "echo ran") -> Path:
    path = tmp_path / "batch.json"
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": command}}
    path.write_text(json.dumps([call]))
    return path


def test_dual_output_refuses_a_symlink_planted_in_the_temp_dir(tmp_path: Path) -> None:
    """A symlink at the --dual-output path: exit 2 naming it, its target untouched."""
    victim = _victim(tmp_path)
    planted = tmp_path / "dual.jsonl"
    planted.symlink_to(victim)
    done = run_toolbatch("run", str(_batch(tmp_path)), "--dual-output", str(planted), cwd=tmp_path)
    assert done.returncode == 2
    assert "symlink" in done.stderr.decode()
    assert victim.read_bytes() == VICTIM_TEXT


@pytest.mark.parametrize("flag", ["--dual-output", "--record"])
def test_an_existing_output_file_at_0644_is_made_0600(tmp_path: Path, flag: str) -> None:
    """It holds tool output: only its owner may read it, even when it existed before."""
    existing = tmp_path / "out.jsonl"
    existing.write_bytes(b"")
    existing.chmod(0o644)
    done = run_toolbatch("run", str(_batch(tmp_path)), flag, str(existing), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600
    assert "ran" in existing.read_text()


def test_a_dual_output_file_replaced_during_the_run_is_reported_not_followed(
    tmp_path: Path,
) -> None:
    """The command swaps the sidecar for a symlink: nothing reaches the symlink's target,
    stdout still gets the results, and one line names the sidecar; exit 1."""
    victim = _victim(tmp_path)
    sidecar = tmp_path / "dual.jsonl"
    swap = f"mv {sidecar} {tmp_path / 'moved.jsonl'} && ln -s {victim} {sidecar} && echo swapped"
    # The sandbox keeps the sidecar read-only (a protected path); with it off, the writer's
    # own check is what stands, and that is what this test proves.
    done = run_toolbatch(
        "run",
        str(_batch(tmp_path, swap)),
        "--dual-output",
        str(sidecar),
        "--sandbox",
        "off",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "swapped" in done.stdout.decode()
    assert victim.read_bytes() == VICTIM_TEXT
    stderr = done.stderr.decode()
    assert "the dual output file" in stderr
    assert "replaced" in stderr
    assert os.path.islink(sidecar)
