"""Group commit: concurrent persists share directory fsyncs, and each artifact is still
durable (its data fsynced before its rename, its rename fsynced) before its path is returned.
Writeback of a file's data is started as soon as it is written, before its fsync."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import anyio
import pytest

import toolbatch.artifacts._files
from toolbatch import ArtifactStore, ToolCall, ToolCallResponse, ToolResult
from toolbatch.finalize import finalize_tool_responses


class _Syscalls:
    """Records the real fsync and rename calls (they still run) in the order they happen.

    An unnamed part given its final name (``linkat`` from ``/proc/self/fd``) counts as a
    rename from what ``/proc`` calls it (``<dir>/#<inode> (deleted)``, as its fsync saw it).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        real_fsync, real_replace, real_link = os.fsync, os.replace, os.link

        def fsync(fd: int) -> None:
            info = os.fstat(fd)
            kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
            target = os.readlink(f"/proc/self/fd/{fd}")
            real_fsync(fd)
            with self._lock:
                self.events.append((f"fsync-{kind}", target))

        def replace(src: str, dst: str | os.PathLike[str]) -> None:
            real_replace(src, dst)
            with self._lock:
                self.events.append(("rename", f"{src} -> {os.fspath(dst)}"))

        def link(src: str, dst: str | os.PathLike[str], **options: object) -> None:
            source = os.readlink(src) if src.startswith("/proc/self/fd/") else src
            real_link(src, dst, **options)  # type: ignore[arg-type]
            with self._lock:
                self.events.append(("rename", f"{source} -> {os.fspath(dst)}"))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        monkeypatch.setattr(os, "link", link)
        real_start = toolbatch.artifacts._files.start_writeback
        if real_start is not None:

            def start_writeback(fd: int) -> None:
                target = os.readlink(f"/proc/self/fd/{fd}")
                real_start(fd)
                with self._lock:
                    self.events.append(("writeback", target))

            monkeypatch.setattr(toolbatch.artifacts._files, "start_writeback", start_writeback)

    def note(self, what: str, path: Path) -> None:
        with self._lock:
            self.events.append((what, os.fspath(path)))

    def index(self, kind: str, needle: str) -> int:
        for position, (event, target) in enumerate(self.events):
            if event == kind and needle in target:
                return position
        raise AssertionError(f"no {kind} of {needle} in {self.events}")

    def dir_syncs_after(self, position: int, directory: Path) -> list[int]:
        return [
            i
            for i, (event, target) in enumerate(self.events)
            if i > position and event == "fsync-dir" and target == os.fspath(directory)
        ]

    def assert_durable_when_returned(self, path: Path, directory: Path) -> None:
        """``path``'s data was fsynced before its rename, and a directory fsync that came
        after the rename finished before the path was returned (noted as ``returned``)."""
        renamed = self.index("rename", f"-> {path}")
        source = self.events[renamed][1].split(" -> ")[0]
        assert self.index("fsync-file", source) < renamed
        returned = self.index("returned", os.fspath(path))
        syncs = [i for i in self.dir_syncs_after(renamed, directory) if i < returned]
        assert syncs, f"{path.name} was returned before a directory fsync covered its rename"


async def test_each_artifact_is_durable_before_its_path_is_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For every file of a concurrent group: data fsync, then rename, then a directory fsync,
    all before persist() hands out the path."""
    root = tmp_path / "store"
    store = ArtifactStore(root)
    calls = _Syscalls(monkeypatch)
    paths: dict[int, Path] = {}

    async def one(index: int) -> None:
        path = await store.persist(f"c{index}", "t", f"output {index}\n" * 5_000)
        calls.note("returned", path)
        paths[index] = path

    async with anyio.create_task_group() as group:
        for index in range(12):
            group.start_soon(one, index)
    assert len(paths) == 12
    for path in paths.values():
        calls.assert_durable_when_returned(path, root)
        assert path.read_text() == f"output {int(path.name.split('-')[1][1:])}\n" * 5_000


async def test_concurrent_persists_share_directory_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finalize that persists 40 responses needs fewer directory fsyncs than files."""
    root = tmp_path / "store"
    store = ArtifactStore(root)
    calls = _Syscalls(monkeypatch)
    batch = [
        ToolCallResponse.from_result(
            ToolCall(id=f"call-{i}", name="run_shell_command"),
            ToolResult(content=f"{i:04d} " + "line of output\n" * 20_000),
        )
        for i in range(40)
    ]
    out = await finalize_tool_responses(batch, budget=40_000, store=store)
    assert all(response.persisted_output_files for response in out)
    assert len(store.written) == 40
    renames = [e for e in calls.events if e[0] == "rename"]
    dir_syncs = [e for e in calls.events if e[0] == "fsync-dir" and e[1] == os.fspath(root)]
    assert len(renames) == 40
    assert 1 <= len(dir_syncs) < len(renames)
    last_rename = max(i for i, e in enumerate(calls.events) if e[0] == "rename")
    assert calls.dir_syncs_after(last_rename, root), "the last rename was never made durable"


async def test_writeback_starts_before_the_data_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Linux offers it, the disk is told to take a file's data right after it is
    written, and the fsync that makes it durable comes after, before the rename."""
    if toolbatch.artifacts._files.start_writeback is None:
        pytest.skip("no sync_file_range on this platform")
    store = ArtifactStore(tmp_path / "store")
    calls = _Syscalls(monkeypatch)
    path = await store.persist("c", "t", "line\n" * 200_000)
    renamed = calls.index("rename", f"-> {path}")
    source = calls.events[renamed][1].split(" -> ")[0]
    assert calls.index("writeback", source) < calls.index("fsync-file", source) < renamed


async def test_without_a_writeback_hint_artifacts_are_still_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A platform without sync_file_range writes the same artifact, fsynced before its
    rename and its rename fsynced before the path is returned."""
    monkeypatch.setattr(toolbatch.artifacts._files, "start_writeback", None)
    root = tmp_path / "store"
    store = ArtifactStore(root)
    calls = _Syscalls(monkeypatch)
    text = "no hint\n" * 100_000
    path = await store.persist("c", "t", text)
    calls.note("returned", path)
    calls.assert_durable_when_returned(path, root)
    assert path.read_text() == text


async def test_a_streamed_artifact_is_durable_before_commit_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's commit: data fsync, rename, then a directory fsync, before the path."""
    root = tmp_path / "store"
    store = ArtifactStore(root)
    calls = _Syscalls(monkeypatch)
    async with store.open_stream("c", "t") as stream:
        await stream.write(b"chunk\n" * 100_000)
        path = await stream.commit()
    calls.note("returned", path)
    calls.assert_durable_when_returned(path, root)


class _SlowDirectory(ArtifactStore):
    """A store whose directory fsyncs take ``delay_s`` (or fail, or hang until released),
    recording the order of its data and directory fsyncs. With ``hold_for_files``, the
    first directory fsync also waits (10 s at most) until that many files are fsynced."""

    def __init__(
        self, root: Path, *, delay_s: float = 0.0, fail: bool = False, hold_for_files: int = 0
    ) -> None:
        self.events: list[str] = []
        self.delay_s = delay_s
        self.fail = fail
        self.released = threading.Event()
        self.released.set()
        self._files = threading.Condition()
        self._hold_for = hold_for_files
        super().__init__(root, fallback_dir=root.parent / "fallback")

    def sync_file(self, fd: int) -> None:
        super().sync_file(fd)
        with self._files:
            self.events.append("file")
            self._files.notify_all()

    def sync_directory(self, directory: Path) -> None:
        if directory != self.root:
            super().sync_directory(directory)
            return
        self.events.append("dir-start")
        if self.events.count("dir-start") == 1:
            with self._files:
                self._files.wait_for(lambda: self.events.count("file") >= self._hold_for, 10)
        self.released.wait()
        threading.Event().wait(self.delay_s)
        if self.fail:
            raise OSError(errno.EIO, "Input/output error", str(directory))
        super().sync_directory(directory)
        self.events.append("dir-end")


async def test_a_slow_directory_fsync_does_not_hold_the_passes_writes(tmp_path: Path) -> None:
    """With one write at a time, the next files are written while the first file's
    directory fsync runs (it waits for them: before, they waited for it, 10 s): four files
    need fewer directory fsyncs than files, and the last rename is still covered by one."""
    store = _SlowDirectory(tmp_path / "store", hold_for_files=4)
    batch = [
        ToolCallResponse.from_result(
            ToolCall(id=f"call-{i}", name="run_shell_command"),
            ToolResult(content=f"{i} " + "output line\n" * 2_000),
        )
        for i in range(4)
    ]
    out = await finalize_tool_responses(batch, budget=2_000, store=store, persist_concurrency=1)
    assert all(response.persisted_output_files for response in out)
    assert store.events.count("file") == 4
    # The second, third and fourth files were written during the first directory fsync.
    first_end = store.events.index("dir-end")
    assert store.events[:first_end].count("file") == 4, store.events
    assert store.events.count("dir-start") < 4, store.events
    assert store.events[-1] == "dir-end"


async def test_a_failed_directory_fsync_hands_out_no_path_and_the_fallback_is_used(
    tmp_path: Path,
) -> None:
    """Every persist whose rename the failed fsync covered gets the error: its file is
    removed from the root, and it is written to the fallback directory instead."""
    store = _SlowDirectory(tmp_path / "store", delay_s=0.1, fail=True)
    texts = {f"c{i}": f"output {i}\n" * 3_000 for i in range(5)}
    paths: dict[str, Path] = {}

    async def one(call_id: str) -> None:
        paths[call_id] = await store.persist(call_id, "t", texts[call_id])

    async with anyio.create_task_group() as group:
        for call_id in texts:
            group.start_soon(one, call_id)
    assert {path.parent for path in paths.values()} == {store.fallback_dir}
    assert {call_id: path.read_text() for call_id, path in paths.items()} == texts
    assert [p.name for p in store.root.iterdir()] == []


async def test_a_persist_cancelled_while_its_rename_waits_is_removed_at_once(
    tmp_path: Path,
) -> None:
    """A directory fsync that hangs: the caller's deadline returns no path, and the file it
    had renamed into place is removed (in a worker thread) while the fsync still hangs;
    its reserved bytes are given back."""
    store = _SlowDirectory(tmp_path / "store")
    store.released.clear()
    try:
        with anyio.move_on_after(0.5) as scope:
            await store.persist("c", "t", "waiting for the directory\n" * 1_000)
        assert scope.cancelled_caught
        with anyio.fail_after(10):
            while list(store.root.iterdir()) or store.bytes_used:  # noqa: ASYNC110  (a thread)
                await anyio.sleep(0.02)
        assert store.events == ["file", "dir-start"]
    finally:
        store.released.set()
