"""The artifact store against planted files and directories and dead writers (issue 14:
items 3, 11 and 14).

Other users are real: the tests run as root and hand directories and files to ``nobody``
(skipped when they cannot chown).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from toolbatch import ArtifactStore, ArtifactWriteError
from toolbatch.artifacts._store import STREAM_FLUSH_BYTES, UnsafeDirectory

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[1]


def _give_away(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    os.chown(path, NOBODY, NOBODY, follow_symlinks=False)


def _blocked_primary(tmp_path: Path) -> Path:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    return blocker / "artifacts"


def _hijack(kind: str, tmp_path: Path) -> Path:
    """A fallback directory as an attacker would leave it, before the store ever runs."""
    fallback = tmp_path / "toolbatch-fallback"
    if kind == "other-owner":
        fallback.mkdir(mode=0o700)
        _give_away(fallback)
    elif kind == "world-writable":
        fallback.mkdir()
        fallback.chmod(0o777)
    elif kind == "symlink":
        target = tmp_path / "attackers"
        target.mkdir(mode=0o700)
        fallback.symlink_to(target)
    return fallback


@pytest.mark.parametrize("kind", ["other-owner", "world-writable", "symlink"])
async def test_a_hijacked_fallback_directory_is_refused_and_never_written(
    tmp_path: Path, kind: str
) -> None:
    """Refused with a warning at open; a failing primary then fails without writing there."""
    fallback = _hijack(kind, tmp_path)
    with capture_logs() as logs:
        store = ArtifactStore(_blocked_primary(tmp_path), fallback_dir=fallback)
    [warning] = [e for e in logs if e["event"] == "artifacts.fallback_refused"]
    assert "refused" in warning["error"]
    with pytest.raises(ArtifactWriteError) as caught:
        await store.persist("c", "t", "secret output")
    assert isinstance(caught.value.fallback_error, UnsafeDirectory)
    assert "no one else can write" in str(caught.value)
    assert list(fallback.resolve().iterdir()) == []
    assert store.written == ()


@pytest.mark.parametrize("kind", ["symlink", "world-writable", "other-owner"])
async def test_an_unsafe_primary_root_is_refused_and_the_fallback_used(
    tmp_path: Path, kind: str
) -> None:
    """The primary root is held to the same rule; the store carries on with the fallback."""
    root = _hijack(kind, tmp_path)
    store = ArtifactStore(root, fallback_dir=tmp_path / "fallback")
    path = await store.persist("c", "t", "kept")
    assert path.parent == tmp_path / "fallback"
    assert path.read_text() == "kept"
    assert list(root.resolve().iterdir()) == []


async def test_a_planted_file_with_the_name_and_size_is_not_reused(tmp_path: Path) -> None:
    """Same name, same size, other bytes: written again, the model reads the real output."""
    store = ArtifactStore(tmp_path / "a")
    text = "the real output " * 100
    path = await store.persist("c", "t", text)
    path.write_text("X" * len(text))  # planted: the attacker's content, the same size
    with capture_logs() as logs:
        again = await ArtifactStore(tmp_path / "a").persist("c", "t", text)
    assert again == path
    assert again.read_text() == text
    assert any(e["event"] == "artifacts.reuse_refused" for e in logs)
    assert _parts(path.parent) == []  # replaced through a temp name, none left


async def test_a_planted_stream_artifact_is_not_reused(tmp_path: Path) -> None:
    """A streamed artifact is compared with the new content before it is reused too."""
    store = ArtifactStore(tmp_path / "a")
    payload = b"line\n" * 1_000
    async with store.open_stream("c", "run_shell_command") as stream:
        await stream.write(payload)
        path = await stream.commit()
    path.write_bytes(b"Y" * len(payload))
    async with ArtifactStore(tmp_path / "a").open_stream("c", "run_shell_command") as stream:
        await stream.write(payload)
        again = await stream.commit()
    assert again == path
    assert again.read_bytes() == payload


async def test_a_file_someone_else_can_change_is_not_reused(tmp_path: Path) -> None:
    """Right content, but owned by another user (who may rewrite it later): not reused."""
    store = ArtifactStore(tmp_path / "a")
    path = await store.persist("c", "t", "output")
    _give_away(path)
    again = await ArtifactStore(tmp_path / "a").persist("c", "t", "output")
    assert again == path
    assert os.lstat(again).st_uid == os.geteuid()
    assert stat.S_IMODE(os.lstat(again).st_mode) == 0o600


async def test_identical_content_is_still_reused(tmp_path: Path) -> None:
    """The check refuses only what differs: the same output is not written twice."""
    store = ArtifactStore(tmp_path / "a")
    path = await store.persist("c", "t", "same")
    inode = path.stat().st_ino
    again = ArtifactStore(tmp_path / "a")
    assert await again.persist("c", "t", "same") == path
    assert path.stat().st_ino == inode
    assert again.written == ()


_WRITER = """
import sys, anyio
import toolbatch
from toolbatch import ArtifactStore
from toolbatch.artifacts._store import STREAM_FLUSH_BYTES
toolbatch.configure_logging("error")
root, fifo = sys.argv[1:]
async def main():
    async with ArtifactStore(root).open_stream("c", "t") as stream:
        await stream.write(b"x" * (STREAM_FLUSH_BYTES + 1))  # one flush: the part exists
        # A flush is written behind: the next one waits for it, so the part holds its bytes.
        await stream.write(b"x" * STREAM_FLUSH_BYTES)
        with open(fifo, "w") as ready:
            ready.write("ready\\n")
        await anyio.sleep_forever()
anyio.run(main)
"""


def _parts(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".tmp-"))


def test_stale_parts_of_dead_writers_go_when_a_store_opens(tmp_path: Path) -> None:
    """A live writer's part (another process) is kept; after its kill -9 the next open
    removes it; a planted part nobody holds is removed at once."""
    root = tmp_path / "a"
    root.mkdir(mode=0o700)
    (root / ".tmp-leftover.part").write_bytes(b"torn")
    (root / "keep.txt").write_text("an artifact")
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(root), str(fifo)], cwd=ROOT)
    try:
        assert fifo.read_text() == "ready\n"  # blocks until the writer's part is there
        [live] = [n for n in _parts(root) if n != ".tmp-leftover.part"]
        ArtifactStore(root)
        assert _parts(root) == [live]  # the dead one went, the live one stayed
        assert (root / live).stat().st_size >= STREAM_FLUSH_BYTES
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        ArtifactStore(root)
        assert _parts(root) == []
        assert (root / "keep.txt").read_text() == "an artifact"
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()


def test_parts_in_a_directory_that_is_not_private_are_not_touched(tmp_path: Path) -> None:
    """A sweep never deletes in a directory the store refuses (it is not the user's own)."""
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    (root / ".tmp-someone.part").write_bytes(b"theirs")
    ArtifactStore(root, fallback_dir=tmp_path / "fallback")
    assert _parts(root) == [".tmp-someone.part"]


_ONE_SHOT_WRITER = """
import sys, anyio
import toolbatch
from toolbatch.testing import SlowDiskStore
toolbatch.configure_logging("error")
root, fifo = sys.argv[1:]
class Told(SlowDiskStore):
    def sync_file(self, fd):
        with open(fifo, "w") as ready:  # its bytes are written: it waits for the disk
            ready.write("ready\\n")
        super().sync_file(fd)
async def main():
    await Told(root, hang=True).persist("c", "t", "x" * 3_000_000)
anyio.run(main)
"""


def test_a_one_shot_writer_killed_mid_write_leaves_nothing(tmp_path: Path) -> None:
    """A one-shot write's part has no name until it is durable: while its writer waits for
    the disk nothing shows in the directory, and after a kill -9 nothing is left to sweep."""
    root = tmp_path / "a"
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    writer = subprocess.Popen(
        [sys.executable, "-c", _ONE_SHOT_WRITER, str(root), str(fifo)], cwd=ROOT
    )
    try:
        assert fifo.read_text() == "ready\n"  # 3 MB written, its fsync hangs
        assert list(root.iterdir()) == []
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        assert list(root.iterdir()) == []
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
