"""The artifact store: atomic, private, capped, never follows symlinks, falls back, writes once."""

from __future__ import annotations

import errno
import os
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest
import xxhash
from hypothesis import given, settings, strategies as st

from tests.strategies import scaled
from toolbatch import ArtifactCapExceeded, ArtifactStore, ArtifactWriteError, ConfigError
from toolbatch.artifacts._naming import artifact_name, ascii_bytes, digest_prefix
from toolbatch.artifacts._store import (
    INLINE_ASCII_CHARS,
    INLINE_ENCODE_CHARS,
    STREAM_FLUSH_BYTES,
    safe_name_component,
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


async def test_persist_writes_utf8_text_and_returns_the_written_path(tmp_path: Path) -> None:
    """persist() writes the whole text as UTF-8 and returns where it is."""
    store = ArtifactStore(tmp_path / "artifacts")
    text = "héllo wörld 😀\n" * 1000
    path = await store.persist("call-1", "run_shell_command", text)
    assert path.parent == tmp_path / "artifacts"
    assert path.read_text("utf-8") == text
    assert store.bytes_used == len(text.encode())
    assert store.written == (path,)


async def test_files_are_0600_inside_a_0700_directory(tmp_path: Path) -> None:
    """The root is created 0700 and every artifact is 0600, whatever the umask."""
    old = os.umask(0)
    try:
        store = ArtifactStore(tmp_path / "deep" / "artifacts")
        path = await store.persist("c", "t", "secret")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "deep" / "artifacts") == 0o700
    assert _mode(path) == 0o600


async def test_an_artifact_is_0600_under_a_umask_that_takes_the_owners_write_bit(
    tmp_path: Path,
) -> None:
    """A umask of 0277 would leave a new file read-only: the artifact is still 0600."""
    store = ArtifactStore(tmp_path / "artifacts")
    old = os.umask(0o277)
    try:
        path = await store.persist("c", "t", "kept whatever the umask")
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert path.read_text() == "kept whatever the umask"


async def test_same_content_for_same_call_is_written_once(tmp_path: Path) -> None:
    """Persisting identical content for a call again returns the same path, no new write."""
    store = ArtifactStore(tmp_path)
    first = await store.persist("c1", "t", "same text")
    mtime = os.stat(first).st_mtime_ns
    second = await store.persist("c1", "t", "same text")
    assert second == first
    assert os.stat(first).st_mtime_ns == mtime
    assert store.written == (first,)
    assert store.bytes_used == len("same text")


async def test_concurrent_identical_persists_write_once(tmp_path: Path) -> None:
    """Ten concurrent persists of the same content for the same call make one file."""
    store = ArtifactStore(tmp_path)
    paths: list[Path] = []

    async def persist() -> None:
        paths.append(await store.persist("c1", "t", "x" * 100_000))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(persist)
    assert len(set(paths)) == 1
    assert len(store.written) == 1
    assert len(_files(tmp_path)) == 1


async def test_two_calls_never_overwrite_each_other(tmp_path: Path) -> None:
    """Identical ids with different content, or different ids with the same content, differ."""
    store = ArtifactStore(tmp_path)
    a = await store.persist("dup", "t", "first")
    b = await store.persist("dup", "t", "second")
    c = await store.persist("a/b", "t", "first")
    d = await store.persist("a_b", "t", "first")
    assert len({a, b, c, d}) == 4
    assert a.read_text() == "first"
    assert b.read_text() == "second"
    assert c.read_text() == d.read_text() == "first"


async def test_a_name_can_be_verified_against_its_file(tmp_path: Path) -> None:
    """The digest in a name is the XXH3-128 of the prefix, the call id and the file's bytes,
    all 32 hex digits, so anyone can check a file against its name."""
    store = ArtifactStore(tmp_path)
    path = await store.persist("call-7", "run_shell_command", "output\n" * 1000)
    digest = path.stem.rsplit("-", 1)[1]
    expected = xxhash.xxh3_128(b"toolbatch-artifact\0call-7\0" + path.read_bytes())
    assert path.name.startswith("run_shell_command-call-7-")
    assert digest == expected.hexdigest()
    assert len(digest) == 32


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("ascii line\n" * 100, id="ascii-encoded-on-the-loop"),
        pytest.param("x" * (INLINE_ASCII_CHARS + 1), id="ascii-encoded-in-a-thread"),
        pytest.param("é\udc80😀\n" * 100, id="utf8-encoded-on-the-loop"),
        pytest.param("é" * (INLINE_ENCODE_CHARS + 1), id="utf8-encoded-in-a-thread"),
    ],
)
async def test_text_is_written_as_utf8_wherever_it_is_encoded(tmp_path: Path, text: str) -> None:
    """Short or long, ASCII or not, the file holds the text's UTF-8 (a lone surrogate kept
    visible as ``\\udXXX``) and its name verifies against those bytes."""
    store = ArtifactStore(tmp_path)
    path = await store.persist("c", "t", text)
    data = path.read_bytes()
    assert data == text.encode("utf-8", "backslashreplace")
    hasher = digest_prefix("c")
    hasher.update(data)
    assert path.name == artifact_name("c", "t", hasher.hexdigest())


class _Str(str):
    """A ``str`` subclass, as a tool's result may hold (CPython keeps its bytes elsewhere)."""


class _ClaimsAscii(str):
    def isascii(self) -> bool:  # a subclass may say anything
        return True


@settings(max_examples=scaled(100), deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=300), subclass=st.booleans())
def test_ascii_text_is_written_from_its_own_bytes(text: str, subclass: bool) -> None:
    """The bytes a thread writes for ASCII text are the text's, a plain ``str`` or not, and
    read-only (a view of the string's own storage where CPython lends it)."""
    value = _Str(text) if subclass else text
    data = ascii_bytes(value)
    assert bytes(data) == text.encode("ascii")
    assert len(data) == len(text)
    if isinstance(data, memoryview):
        assert data.readonly


async def test_a_text_that_claims_to_be_ascii_is_still_written_as_utf8(tmp_path: Path) -> None:
    """A ``str`` subclass whose ``isascii`` says yes for non-ASCII text gets its UTF-8
    written, not a wrong size or an encoding error."""
    text = _ClaimsAscii("é" * (INLINE_ASCII_CHARS + 1))
    store = ArtifactStore(tmp_path)
    path = await store.persist("c", "t", text)
    assert path.read_bytes() == str(text).encode("utf-8")
    assert store.bytes_used == 2 * len(text)


async def test_a_long_ascii_artifact_is_reused_only_when_its_bytes_are_the_text(
    tmp_path: Path,
) -> None:
    """A later store finds a long ASCII text's artifact (compared in full with the string's
    own bytes) and writes nothing; a file of the same name and size holding other bytes is
    replaced instead."""
    text = "build output line\n" * (INLINE_ASCII_CHARS // 8)
    first = await ArtifactStore(tmp_path).persist("c", "t", text)
    later = ArtifactStore(tmp_path)
    assert await later.persist("c", "t", text) == first
    assert later.written == ()
    first.write_bytes(text[:-1].encode("ascii") + b"X")  # same name and size, other bytes
    replacing = ArtifactStore(tmp_path)
    assert await replacing.persist("c", "t", text) == first
    assert replacing.written == (first,)
    assert first.read_bytes() == text.encode("ascii")


async def test_a_long_ascii_text_is_persisted_without_a_copy_of_it(tmp_path: Path) -> None:
    """Persisting 16 MB of ASCII output allocates nothing near its size: the thread writes
    and hashes the string's own bytes (a copy each took about 15 % of a persist's CPU)."""
    text = "0123456789abcdef" * (2**20)
    store = ArtifactStore(tmp_path)
    tracemalloc.start()
    try:
        path = await store.persist("c", "t", text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert path.stat().st_size == len(text)
    assert peak < len(text) // 8, f"persisting {len(text)} bytes allocated {peak} at peak"


@settings(max_examples=scaled(50), deadline=None)
@given(
    ids=st.lists(st.sampled_from(["c", "c/1", "c_1", "x" * 80, "x" * 81]), min_size=2, max_size=2),
    contents=st.lists(st.binary(max_size=64), min_size=2, max_size=2),
)
def test_names_differ_exactly_when_call_or_content_differs(
    ids: list[str], contents: list[bytes]
) -> None:
    """Two (call id, content) pairs share a name only when both are equal, even where the
    safe ids coincide (``c/1`` and ``c_1``, ids cut at 64 characters)."""
    names = []
    for call_id, content in zip(ids, contents, strict=True):
        hasher = digest_prefix(call_id)
        hasher.update(content)
        names.append(artifact_name(call_id, "t", hasher.hexdigest()))
    assert (names[0] == names[1]) == (ids[0] == ids[1] and contents[0] == contents[1])


@pytest.mark.parametrize(
    "call_id",
    [
        pytest.param("../../x", id="traversal"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("x" * 10_000, id="10k-id"),
        pytest.param("..", id="dotdot"),
        pytest.param("", id="empty"),
        pytest.param("\n\r\t\x1b[31m", id="controls"),
        pytest.param("😀/../é", id="unicode-traversal"),
    ],
)
async def test_hostile_call_ids_stay_inside_the_root(tmp_path: Path, call_id: str) -> None:
    """A hostile id yields a short, plain file name directly inside the root."""
    root = tmp_path / "root"
    store = ArtifactStore(root)
    path = await store.persist(call_id, "../../tool\x00", "content")
    assert path.parent == root
    assert path.is_file()
    assert len(path.name) < 160
    assert not path.name.startswith(".")
    assert all(ch.isalnum() or ch in "._-" for ch in path.name)
    assert _files(tmp_path) == [path]


def test_safe_name_component_never_returns_dots_or_separators() -> None:
    """The sanitizer drops separators, leading dots and controls and bounds the length."""
    assert safe_name_component("../../x") == "_.._x"
    for value in ["..", ".", "", "/", "\x00", "a" * 500]:
        cleaned = safe_name_component(value)
        assert cleaned not in {"", ".", ".."}
        assert "/" not in cleaned
        assert "\x00" not in cleaned
        assert len(cleaned) <= 64


async def test_planted_symlink_at_destination_is_never_followed(tmp_path: Path) -> None:
    """A symlink planted where the artifact goes is replaced; its target stays untouched."""
    store = ArtifactStore(tmp_path / "root")
    probe = await store.persist("c", "t", "payload")
    probe.unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    probe.symlink_to(victim)
    path = await store.persist("c", "t", "payload")
    assert path == probe
    assert not path.is_symlink()
    assert path.read_text() == "payload"
    assert victim.read_text() == "do not touch"


async def test_per_file_cap_writes_nothing_and_names_the_cap(tmp_path: Path) -> None:
    """Text over the per-file cap raises ArtifactCapExceeded('file') and writes nothing."""
    store = ArtifactStore(tmp_path, max_file_bytes=1000)
    with pytest.raises(ArtifactCapExceeded) as caught:
        await store.persist("c", "t", "é" * 501)  # 1002 UTF-8 bytes
    assert caught.value.cap == "file"
    assert caught.value.limit == 1000
    assert caught.value.requested == 1002
    assert "max_file_bytes" in str(caught.value)
    assert _files(tmp_path) == []
    assert store.bytes_used == 0


async def test_total_cap_holds_under_50_concurrent_persists(tmp_path: Path) -> None:
    """50 concurrent 1 KB persists under a 10 KB store cap: exactly 10 land, 40 are refused."""
    store = ArtifactStore(tmp_path, max_total_bytes=10_000)
    written: list[Path] = []
    refused: list[ArtifactCapExceeded] = []

    async def persist(i: int) -> None:
        try:
            written.append(await store.persist(f"call-{i}", "t", f"{i:04d}" * 250))
        except ArtifactCapExceeded as exc:
            refused.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(persist, i)
    assert len(written) == 10
    assert len(refused) == 40
    assert all(exc.cap == "total" for exc in refused)
    assert store.bytes_used == 10_000
    assert sum(p.stat().st_size for p in _files(tmp_path)) == 10_000


async def test_a_full_store_still_reuses_an_identical_artifact(tmp_path: Path) -> None:
    """At its total cap the store refuses new bytes but still returns an artifact that
    already holds the same content (it needs no room)."""
    store = ArtifactStore(tmp_path, max_total_bytes=10)
    first = await store.persist("c", "t", "0123456789")
    assert await store.persist("c", "t", "0123456789") == first
    assert await store.persist_bytes("c", "t", b"0123456789", suffix=".txt") == first
    with pytest.raises(ArtifactCapExceeded):
        await store.persist("c", "t", "x")
    assert store.written == (first,)
    assert _files(tmp_path) == [first]


async def test_unwritable_primary_falls_back_and_returns_the_real_path(tmp_path: Path) -> None:
    """When the primary is unusable (here: a file, not a directory) the fallback is used."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    store = ArtifactStore(blocker / "artifacts", fallback_dir=tmp_path / "fallback")
    path = await store.persist("c", "t", "kept anyway")
    assert path.parent == tmp_path / "fallback"
    assert path.read_text() == "kept anyway"
    assert _mode(tmp_path / "fallback") == 0o700


async def test_default_fallback_is_under_the_system_temp_dir(tmp_path: Path) -> None:
    """Without a fallback_dir the store falls back to a private dir under the temp dir."""
    import tempfile

    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ArtifactStore(blocker / "artifacts")
    assert store.fallback_dir.parent == Path(tempfile.gettempdir())
    path = await store.persist("fallback-default", "t", os.urandom(8).hex())
    try:
        assert path.parent == store.fallback_dir
    finally:
        path.unlink()


async def test_both_directories_failing_raises_with_both_causes(tmp_path: Path) -> None:
    """Primary and fallback both unusable: a typed error carrying both causes, nothing kept."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ArtifactStore(blocker / "a", fallback_dir=blocker / "b")
    with pytest.raises(ArtifactWriteError) as caught:
        await store.persist("c", "t", "lost?")
    assert isinstance(caught.value.primary_error, OSError)
    assert isinstance(caught.value.fallback_error, OSError)
    assert str(blocker / "a") in str(caught.value)
    assert str(blocker / "b") in str(caught.value)
    assert store.bytes_used == 0


async def test_disk_full_leaves_no_partial_file_and_falls_back(
    small_fs: Path, tmp_path: Path
) -> None:
    """ENOSPC mid-write (a real 1 MiB tmpfs) leaves no partial file; the fallback gets it."""
    store = ArtifactStore(small_fs / "artifacts", fallback_dir=tmp_path / "fallback")
    path = await store.persist("c", "t", "z" * (3 * 2**20))
    assert path.parent == tmp_path / "fallback"
    assert path.stat().st_size == 3 * 2**20
    assert _files(small_fs) == []


async def test_cancelled_persist_leaves_nothing_at_the_final_path(tmp_path: Path) -> None:
    """A persist cancelled mid-write returns at once; once its worker thread is done, it
    has left neither a final file nor a temp file, and its reservation is given back."""
    store = ArtifactStore(tmp_path)
    with anyio.move_on_after(0.001) as scope:
        await store.persist("c", "t", "q" * (64 * 2**20))
    assert scope.cancelled_caught
    with anyio.fail_after(10):
        while _files(tmp_path) or store.bytes_used:  # noqa: ASYNC110  (a worker thread)
            await anyio.sleep(0.01)


async def test_stream_commits_everything_it_received(tmp_path: Path) -> None:
    """A streaming writer appends chunks and publishes one file identical to the input."""
    store = ArtifactStore(tmp_path)
    chunks = [os.urandom(7000) for _ in range(500)]
    async with store.open_stream("c", "run_shell_command", suffix=".bin") as stream:
        for chunk in chunks:
            await stream.write(chunk)
        path = await stream.commit()
    assert path.read_bytes() == b"".join(chunks)
    assert path.suffix == ".bin"
    assert stream.bytes_dropped == 0
    assert _mode(path) == 0o600
    assert store.written == (path,)


_BLOCK = os.urandom(2**20)
_SOURCE = _BLOCK * 4


@settings(max_examples=scaled(5), deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3 * 2**20), min_size=1, max_size=40),
    sync_at=st.integers(0, 40),
)
def test_a_stream_over_several_flushes_is_published_whole_and_named_by_its_bytes(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], sync_at: int
) -> None:
    """Flushes are written behind (one in flight while the next fills): whatever the chunk
    sizes, and with ``sync_early`` anywhere, the file holds every byte in order and its
    name is the digest of exactly those bytes."""
    chunks = [_SOURCE[size % 2**20 : size % 2**20 + size] for size in sizes]
    chunks += [_BLOCK] * (STREAM_FLUSH_BYTES * 2 // 2**20 + 1 - sum(sizes) // 2**20)  # 2 flushes+
    root = tmp_path_factory.mktemp("stream")

    async def stream_it() -> Path:
        store = ArtifactStore(root, max_file_bytes=2**30, max_total_bytes=2**30)
        async with store.open_stream("c", "t") as stream:
            for index, chunk in enumerate(chunks):
                if index == sync_at:
                    await stream.sync_early()
                await stream.write(chunk)
            return await stream.commit()

    path = anyio.run(stream_it)
    data = b"".join(chunks)
    assert path.read_bytes() == data
    hasher = digest_prefix("c")
    hasher.update(data)
    assert path.name == artifact_name("c", "t", hasher.hexdigest())
    path.unlink()


async def test_stream_keeps_the_first_cap_bytes_and_counts_the_rest(tmp_path: Path) -> None:
    """Past the per-file cap the stream keeps exactly the cap and reports what it dropped."""
    store = ArtifactStore(tmp_path, max_file_bytes=100_000)
    data = os.urandom(250_000)
    async with store.open_stream("c", "t") as stream:
        for start in range(0, len(data), 30_000):
            await stream.write(data[start : start + 30_000])
        path = await stream.commit()
    assert path.read_bytes() == data[:100_000]
    assert stream.bytes_dropped == 150_000
    assert stream.dropped_by == "file"
    assert stream.bytes_received == 250_000


async def test_stream_left_uncommitted_is_discarded(tmp_path: Path) -> None:
    """Leaving the block without commit() removes the temp file and frees the reservation."""
    store = ArtifactStore(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        async with store.open_stream("c", "t") as stream:
            await stream.write(b"x" * (3 * 2**20))
            raise RuntimeError("boom")
    assert _files(tmp_path) == []
    assert store.bytes_used == 0


async def test_stream_of_empty_output_commits_an_empty_file(tmp_path: Path) -> None:
    """Committing a stream that received nothing publishes an empty artifact."""
    store = ArtifactStore(tmp_path)
    async with store.open_stream("c", "t") as stream:
        path = await stream.commit()
    assert path.read_bytes() == b""


async def test_stream_on_a_full_disk_reports_failure_and_keeps_nothing(small_fs: Path) -> None:
    """ENOSPC mid-stream: commit raises ArtifactWriteError, no file is left, bytes are counted."""
    store = ArtifactStore(small_fs / "a", fallback_dir=small_fs / "b")
    async with store.open_stream("c", "t") as stream:
        for _ in range(4):
            await stream.write(b"y" * 2**20)
        with pytest.raises(ArtifactWriteError):
            await stream.commit()
    assert stream.bytes_dropped == 4 * 2**20
    assert _files(small_fs) == []
    assert store.bytes_used == 0


async def test_identical_streamed_output_reuses_the_artifact(tmp_path: Path) -> None:
    """Streaming the same bytes for the same call twice publishes one file."""
    store = ArtifactStore(tmp_path)
    paths = []
    for _ in range(2):
        async with store.open_stream("c", "t") as stream:
            await stream.write(b"hello\n" * 1000)
            paths.append(await stream.commit())
    assert paths[0] == paths[1]
    assert len(store.written) == 1
    assert store.bytes_used == 6000


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_caps_are_rejected_naming_the_option(tmp_path: Path, bad: object) -> None:
    """A non-positive or non-int cap is a clear error naming the option."""
    with pytest.raises(ConfigError, match="max_file_bytes"):
        ArtifactStore(tmp_path, max_file_bytes=bad)  # type: ignore[arg-type]


async def test_a_file_system_without_unnamed_parts_gets_named_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where O_TMPFILE is refused (a file system without it), a one-shot write uses a
    named, locked part: the artifact is the same and no part is left behind."""
    from toolbatch.artifacts import _files

    refused: list[str] = []
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **options: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            refused.append(os.fspath(path))
            raise OSError(errno.EOPNOTSUPP, "Operation not supported", os.fspath(path))
        return real_open(path, flags, *args, **options)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(_files, "_NO_UNNAMED", set())
    store = ArtifactStore(tmp_path / "a")
    first = await store.persist("c1", "t", "one\n" * 50_000)
    second = await store.persist("c2", "t", "two\n" * 50_000)
    assert first.read_text() == "one\n" * 50_000
    assert second.read_text() == "two\n" * 50_000
    assert refused == [os.fspath(store.root)]  # asked once: the directory is remembered
    assert sorted(p.name for p in store.root.iterdir()) == sorted([first.name, second.name])
    assert _mode(first) == 0o600


async def test_output_persisted_in_the_fallback_is_found_there_again(tmp_path: Path) -> None:
    """Written to the fallback while the root was unusable, the same output for the same
    call is found there again: by the store that wrote it, and by a store opened later
    whose root works."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    fallback = tmp_path / "fallback"
    broken = ArtifactStore(blocker / "artifacts", fallback_dir=fallback)
    path = await broken.persist("c", "t", "kept once\n" * 10_000)
    assert path.parent == fallback
    assert await broken.persist("c", "t", "kept once\n" * 10_000) == path
    later = ArtifactStore(tmp_path / "root", fallback_dir=fallback)
    assert await later.persist("c", "t", "kept once\n" * 10_000) == path
    assert later.written == ()
    assert list(later.root.iterdir()) == []


async def test_a_fallback_too_full_to_list_is_always_looked_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store keeps the fallback's names only up to a limit; past it, the fallback is
    looked in for every write, and output already there is still found."""
    from toolbatch.artifacts import _store

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    fallback = tmp_path / "fallback"
    path = await ArtifactStore(blocker / "a", fallback_dir=fallback).persist("c", "t", "once")
    for index in range(3):
        (fallback / f"other-{index}.txt").write_text("other")
    monkeypatch.setattr(_store, "FALLBACK_NAMES_KEPT", 2)
    later = ArtifactStore(tmp_path / "root", fallback_dir=fallback)
    assert await later.persist("c", "t", "once") == path
    assert later.written == ()
