"""Generic persistence: oversized custom-tool output is persisted once and previewed."""

from __future__ import annotations

from pathlib import Path

from toolbatch import ArtifactStore, ToolCall, ToolResult
from toolbatch._core._preview import TRUNCATION_HEADER
from toolbatch.producers._generic import apply_output_threshold

CALL = ToolCall(id="call-7", name="dump")


async def test_output_over_the_threshold_is_persisted_and_previewed(tmp_path: Path) -> None:
    """Over the threshold: the file holds everything, the model gets ~2,000 chars naming it."""
    store = ArtifactStore(tmp_path)
    text = "".join(f"line {i}\n" for i in range(10_000))
    result = await apply_output_threshold(
        ToolResult(content=text), call=CALL, store=store, threshold=25_000
    )
    [path] = result.persisted_output_files or ()
    assert path.read_text() == text
    assert isinstance(result.content, str)
    assert str(path) in result.content
    assert len(result.content) < 2_400
    assert result.content.rstrip().endswith("line 9999")
    assert "line 0\n" in result.content


async def test_output_under_the_threshold_is_untouched(tmp_path: Path) -> None:
    """At or under the threshold the very same result comes back, nothing written."""
    store = ArtifactStore(tmp_path)
    original = ToolResult(content="x" * 25_000)
    result = await apply_output_threshold(original, call=CALL, store=store, threshold=25_000)
    assert result is original
    assert store.written == ()


async def test_an_already_decided_result_is_never_persisted_again(tmp_path: Path) -> None:
    """A producer's own decision (() or paths) is respected: no second write."""
    store = ArtifactStore(tmp_path)
    decided = ToolResult(content="y" * 100_000, persisted_output_files=())
    result = await apply_output_threshold(decided, call=CALL, store=store, threshold=10)
    assert result is decided
    assert store.written == ()


async def test_threshold_none_never_persists(tmp_path: Path) -> None:
    """output_threshold=None leaves even huge output alone."""
    store = ArtifactStore(tmp_path)
    original = ToolResult(content="z" * 1_000_000)
    assert (
        await apply_output_threshold(original, call=CALL, store=store, threshold=None) is original
    )


async def test_failed_persistence_still_previews_and_says_so(tmp_path: Path) -> None:
    """Both directories failing: a preview without a path and persisted_output_files=()."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ArtifactStore(blocker / "a", fallback_dir=blocker / "b")
    result = await apply_output_threshold(
        ToolResult(content="q" * 50_000), call=CALL, store=store, threshold=25_000
    )
    assert result.persisted_output_files == ()
    assert isinstance(result.content, str)
    assert result.content.startswith(TRUNCATION_HEADER + "\nThe full output was not saved: ")
    assert len(result.content) < 2_600


async def test_fallback_path_is_the_one_named(tmp_path: Path) -> None:
    """When the primary fails, the preview names the fallback path actually written."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ArtifactStore(blocker / "a", fallback_dir=tmp_path / "fallback")
    result = await apply_output_threshold(
        ToolResult(content="w" * 30_000), call=CALL, store=store, threshold=25_000
    )
    [path] = result.persisted_output_files or ()
    assert path.parent == tmp_path / "fallback"
    assert isinstance(result.content, str)
    assert str(path) in result.content


async def test_preview_never_splits_a_surrogate_pair() -> None:
    """Head and tail cuts keep high/low surrogate code points together."""
    text = "\ud83d\ude00" * 5_000
    result = await apply_output_threshold(
        ToolResult(content=text), call=CALL, store=None, threshold=1_000
    )
    assert isinstance(result.content, str)
    body = result.content.split("\n\n", 1)[1]
    head, _, tail = body.partition(" characters omitted ...]\n")
    head = head.rpartition("\n[... ")[0]
    assert head
    assert tail
    assert not head.endswith("\ud83d")
    assert not tail.startswith("\ude00")
    assert len(result.content) <= 2_000


async def test_the_preview_is_the_finalizers_format(tmp_path: Path) -> None:
    """A persisted preview reads like the finalizer's: header, the path, head and tail."""
    store = ArtifactStore(tmp_path)
    text = "".join(f"line {i}\n" for i in range(10_000))
    result = await apply_output_threshold(
        ToolResult(content=text), call=CALL, store=store, threshold=25_000
    )
    [path] = result.persisted_output_files or ()
    assert isinstance(result.content, str)
    assert result.content.startswith(f"{TRUNCATION_HEADER}\nFull output: {path}\n\nline 0\n")
    assert " characters omitted ...]\n" in result.content


async def test_text_over_the_threshold_that_fits_the_preview_is_shown_whole(
    tmp_path: Path,
) -> None:
    """A threshold under the preview size persists the text and still shows all of it."""
    store = ArtifactStore(tmp_path)
    result = await apply_output_threshold(
        ToolResult(content="k" * 1_500), call=CALL, store=store, threshold=1_000
    )
    [path] = result.persisted_output_files or ()
    assert result.content == "k" * 1_500
    assert path.read_text() == "k" * 1_500
