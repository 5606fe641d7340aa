"""Properties of the shell producer's text over arbitrary output, through real bash runs.

Whatever bytes a command prints (multi-byte characters cut anywhere, invalid bytes, long
lines or none), the model text is valid Unicode, at or under the trigger it is the whole
output, over it the preview's head is a prefix and its tail a suffix of the output, the
artifact is byte-identical, and the exit line comes last.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.strategies import scaled
from toolbatch import ArtifactStore, ToolCall, ToolResult
from toolbatch.producers import ProducerContext, ShellProducer

PREVIEW_CHARS = 200
DISPLAY_WINDOW_BYTES = 256

_pieces = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\0")).map(
        lambda text: text.encode("utf-8")
    ),
    st.sampled_from([b"\n", b"\n\n", b"\xff", b"\xc3", b"\xe2\x82", b"\x80\x80", b"\xed\xa0\x80"]),
    st.binary(max_size=8).filter(lambda data: b"\0" not in data),
    st.integers(min_value=1, max_value=1500).map(lambda n: b"line\n" * n),
    st.integers(min_value=1, max_value=800).map(lambda n: "😀é".encode() * n),
    st.integers(min_value=1, max_value=800).map(lambda n: "😀".encode() * n),
)
outputs = st.lists(_pieces, max_size=12).map(b"".join)
"""Command output: text, newlines, invalid or cut UTF-8, sometimes long; never NUL (binary)."""

_NOTE = re.compile(
    r"\n\[[\d,]+ invalid UTF-8 bytes (?:shown above )?were replaced(?: with U\+FFFD)?\]$"
)
_MARKER = re.compile(r"\n\[\.\.\. ([\d,]+) bytes omitted \.\.\.\]\n")
_DISPLAY_MARKER = re.compile(r"(?:\n)?\.\.\. \[([\d,]+) bytes omitted\] \.\.\.\n")


def _decoded(data: bytes) -> str:
    """The output as the model should see it: each invalid byte one U+FFFD."""
    text = data.decode("utf-8", "surrogateescape")
    return re.sub("[\udc80-\udcff]", "\ufffd", text)


async def _run(data: bytes, trigger: int, directory: Path) -> tuple[ToolResult, ArtifactStore]:
    source = directory / "out.bin"
    source.write_bytes(data)
    store = ArtifactStore(directory / "artifacts")
    producer = ShellProducer(
        output_trigger_chars=trigger,
        preview_chars=PREVIEW_CHARS,
        display_window_bytes=DISPLAY_WINDOW_BYTES,
    )
    call = ToolCall(id="p", name="run_shell_command", args={"command": f"cat {source}"})
    return await producer.run(call, ProducerContext(store=store)), store


@settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=outputs, trigger=st.integers(min_value=0, max_value=3000))
def test_model_text_is_the_output_or_a_faithful_preview(data: bytes, trigger: int) -> None:
    """Whole at or under the trigger; else prefix + marker + suffix, and the file is exact."""
    with tempfile.TemporaryDirectory() as scratch:
        result, store = anyio.run(_run, data, trigger, Path(scratch))
        assert isinstance(result.content, str)
        assert isinstance(result.display, str)
        result.content.encode("utf-8")  # no lone surrogates reach the model
        result.display.encode("utf-8")
        assert result.content.endswith("[exit code: 0]")
        body = _NOTE.sub("", result.content.removesuffix("[exit code: 0]").removesuffix("\n"))
        expected = _decoded(data)
        if len(expected) <= trigger:
            assert result.persisted_output_files is None
            assert store.written == ()
            assert body == (expected.removesuffix("\n") if expected else "(no output)")
            return
        (path,) = store.written
        assert result.persisted_output_files == (path,)
        assert path.read_bytes() == data
        if len(expected) <= PREVIEW_CHARS:  # over the trigger, within the preview: whole
            assert body == expected.removesuffix("\n")
            return
        assert len(result.content) <= PREVIEW_CHARS
        header, preview = body.split("\n\n", 1)
        assert header.startswith(f"Tool output truncated.\nFull output: {path}")
        _check_head_and_tail(preview, expected, limit=PREVIEW_CHARS, marker=_MARKER)
        footer = f"\nOutput too long ({len(data):,} bytes); the full output was saved to: {path}"
        shown = _NOTE.sub("", result.display.removesuffix("\n[exit code: 0]"))
        assert shown.endswith(footer)
        _check_head_and_tail(
            shown.removesuffix(footer), expected, limit=DISPLAY_WINDOW_BYTES, marker=_DISPLAY_MARKER
        )


def _check_head_and_tail(
    preview: str, expected: str, *, limit: int, marker: re.Pattern[str]
) -> None:
    """``preview`` is a prefix, a marker and a suffix of ``expected`` (or all of it)."""
    found = marker.search(preview)
    if found is None:  # the whole (short) output, or a head alone (no room for a tail)
        assert preview == expected.removesuffix("\n") or expected.startswith(preview)
        return
    head, tail = preview[: found.start()], preview[found.end() :]
    assert expected.startswith(head)
    assert (expected.removesuffix("\n") or expected).endswith(tail)
    assert len(head) + len(tail) <= limit
    omitted = int(found.group(1).replace(",", ""))
    assert 0 <= omitted <= len(expected.encode())
