"""The one preview format: bounded, the trailer last, and re-cut without a second header."""

from __future__ import annotations

from hypothesis import given, strategies as st

from tests import strategies
from toolbatch._core._preview import (
    TRUNCATION_HEADER,
    Excerpt,
    TextCutter,
    cut_ends,
    cut_text,
    fit_excerpt,
    fit_text,
)

texts = st.text(min_size=1, max_size=3_000)
notes = st.lists(st.text(st.characters(blacklist_characters="\n"), max_size=40), max_size=3)
trailers = st.sampled_from(["", "[exit code: 0]", "[note]\n[exit code: 3]", "\n[cancelled]"])


@given(
    text=texts,
    limit=st.integers(0, 4_000),
    notes=notes,
    trailer=trailers,
    unit=st.sampled_from(["characters", "bytes"]),
)
def test_a_preview_never_exceeds_its_limit_and_ends_with_its_trailer(
    text: str, limit: int, notes: list[str], trailer: str, unit: str
) -> None:
    """Whatever the limit, notes and trailer: at most ``limit``, one header, the trailer last."""
    length = len(text) if unit == "characters" else len(text.encode("utf-8", "surrogatepass"))
    source = Excerpt(text, text, length, unit, tuple(notes), trailer)  # type: ignore[arg-type]
    preview, kept = fit_excerpt(source, limit, paths=["/artifacts/a.txt"])
    assert len(preview) <= limit
    assert preview.count(TRUNCATION_HEADER) <= 1 + text.count(TRUNCATION_HEADER)
    if " omitted ...]\n" in preview and trailer:
        assert preview.endswith(trailer.lstrip("\n"))
    again, _ = fit_excerpt(kept, limit // 2, paths=["/artifacts/a.txt"])
    direct, _ = fit_excerpt(source, limit // 2, paths=["/artifacts/a.txt"])
    assert len(again) <= limit // 2
    assert again.count(TRUNCATION_HEADER) == direct.count(TRUNCATION_HEADER)


cuts = given(
    text=strategies.texts(),
    limit=st.integers(-2, 4_000),
    paths=st.lists(st.sampled_from(["/artifacts/a.txt", "/x/" + "long/" * 40]), max_size=2),
)
"""A text, a budget for its preview and the artifact paths the preview names."""


@cuts
def test_cut_text_is_the_preview_of_the_complete_text(
    text: str, limit: int, paths: list[str]
) -> None:
    """The finalizer's fast cut writes exactly what fit_excerpt writes, and keeps its ends."""
    preview, head, tail = cut_text(text, limit, paths)
    expected, kept = fit_excerpt(Excerpt.of(text), limit, paths=paths)
    assert (preview, head, tail) == (expected, kept.head, kept.tail)
    if len(text) > limit:
        assert fit_text(text, limit, paths=paths) == expected


@cuts
def test_a_cut_text_preview_gives_back_its_ends_from_their_sizes(
    text: str, limit: int, paths: list[str]
) -> None:
    """Kept as its preview and two sizes, a cut still yields the head and tail it kept."""
    preview, head, tail = cut_text(text, limit, paths)
    assert cut_ends(preview, len(head), len(tail), len(text)) == (head, tail)


def test_a_cut_text_preview_is_pinned() -> None:
    """The one format, character for character: header, path, blank line, head, marker, tail."""
    text = "".join(f"line {i}\n" for i in range(100))
    preview, head, tail = cut_text(text, 160, ["/a/out.txt"])
    assert preview == (
        "Tool output truncated.\nFull output: /a/out.txt\n\n"
        "line 0\nline 1\nl\n[... 712 characters omitted ...]\n"
        "ine 92\nline 93\nline 94\nline 95\nline 96\nline 97\nline 98\nline 99\n"
    )
    assert (head, tail) == ("line 0\nline 1\nl", text[-63:])


@cuts
def test_a_text_cutter_writes_exactly_what_cut_text_writes(
    text: str, limit: int, paths: list[str]
) -> None:
    """One cutter for many texts of one length (its layouts shared, surrogates anywhere)
    gives each the preview cut_text gives, with the sizes of the ends it kept."""
    cutter = TextCutter()
    shifted = [
        text,
        text[1:] + "\ud800",
        "\udc00" + text[:-1],
        text[::-1],
        "\ud83d\ude00" + text[2:],
    ]
    for variant in shifted:
        for room in (limit, limit + 1, limit - 1):
            if len(variant) <= room or len(variant) != len(text):
                continue
            preview, head, tail = cut_text(variant, room, paths)
            assert cutter.cut(variant, room, paths) == (preview, len(head), len(tail))


@given(
    texts=st.lists(strategies.texts(), min_size=1, max_size=6),
    limits=st.lists(st.integers(-2, 2_000), min_size=6, max_size=6),
    paths=st.sampled_from([None, ["/artifacts/a.txt"], ["/x/" + "long/" * 40, "/b.txt"]]),
)
def test_a_text_cutter_cuts_a_batch_as_cut_text_cuts_each(
    texts: list[str], limits: list[int], paths: list[str] | None
) -> None:
    """cut_all over a batch (shared rooms and lengths, with or without paths) gives each
    text the preview cut_text gives it, in pick order, with the sizes of its ends."""
    batch = [variant for text in texts for variant in (text, text[::-1], "\udc00" + text[1:])]
    rooms = [limits[i % len(limits)] for i in range(len(batch))]
    picks = [i for i in reversed(range(len(batch))) if len(batch[i]) > rooms[i]]
    names = None if paths is None else [paths] * len(picks)
    previews, heads, tails = TextCutter().cut_all(batch, rooms, picks, names)
    for i, preview, head_size, tail_size in zip(picks, previews, heads, tails, strict=True):
        expected, head, tail = cut_text(batch[i], rooms[i], paths or ())
        assert (preview, head_size, tail_size) == (expected, len(head), len(tail))
