"""The one preview format: bounded, the trailer last, and re-cut without a second header."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolbatch._preview import TRUNCATION_HEADER, Excerpt, fit_excerpt

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
