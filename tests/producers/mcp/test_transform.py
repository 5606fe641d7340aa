"""The result transform: text, media, resources, errors, and large text persisted once."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import mcp_types as types
import pytest
from hypothesis import given, settings, strategies as st

from tests.strategies import scaled
from toolbatch import (
    ArtifactStore,
    FunctionResponsePart,
    InlineDataPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.producers.mcp import transform_result

CALL = ToolCall(id="call-7", name="mcp__srv__tool")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def response(result: ToolResult) -> ToolCallResponse:
    return ToolCallResponse.from_result(CALL, result)


def output_of(result: ToolResult) -> object:
    part = response(result).parts[0]
    assert isinstance(part, FunctionResponsePart)
    return part.function_response.response


async def test_text_parts_become_the_output_and_nothing_is_persisted() -> None:
    """Small text parts are joined into the output; no persistence decision is made."""
    result = await transform_result(
        types.CallToolResult(content=[text("first"), text("second")]), call=CALL, store=None
    )
    assert output_of(result) == {"output": "first\nsecond"}
    assert result.persisted_output_files is None
    assert result.display == {"text": "first\nsecond"}


@settings(max_examples=scaled(100), deadline=None)
@given(
    texts=st.lists(st.text(max_size=40), min_size=1, max_size=3),
    structured=st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
async def test_any_text_within_the_trigger_is_the_output_whole_in_either_shape(
    texts: list[str], structured: dict[str, int] | None
) -> None:
    """One part (converted without awaiting) or several: the model gets the parts joined by
    newlines, the display the same text and the structured content, and nothing is
    persisted."""
    result = await transform_result(
        types.CallToolResult(content=[text(t) for t in texts], structured_content=structured),
        call=CALL,
        store=None,
        trigger_chars=40,
    )
    joined = "\n".join(texts)
    assert output_of(result) == {"output": joined}
    expected_display: dict[str, object] = {"text": joined}
    if structured is not None:
        expected_display["structuredContent"] = structured
    assert result.display == expected_display
    assert result.error is None
    assert result.persisted_output_files is None
    assert result.preview is None


async def test_media_become_inline_data_untouched_after_the_response() -> None:
    """Image and audio data reach the model byte for byte, as inlineData parts."""
    wav = base64.b64encode(b"RIFF....WAVEfmt ").decode()
    result = await transform_result(
        types.CallToolResult(
            content=[
                text("here"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                types.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
            ]
        ),
        call=CALL,
        store=None,
    )
    parts = response(result).parts
    assert [type(part) for part in parts] == [FunctionResponsePart, InlineDataPart, InlineDataPart]
    image, sound = parts[1], parts[2]
    assert isinstance(image, InlineDataPart)
    assert isinstance(sound, InlineDataPart)
    assert (image.inline_data.mime_type, image.inline_data.data) == ("image/png", PNG)
    assert (sound.inline_data.mime_type, sound.inline_data.data) == ("audio/wav", wav)
    assert response(result).content_length == len("here")
    assert result.display == {
        "text": "here",
        "media": [
            {"type": "image", "mimeType": "image/png", "bytes": 264},
            {"type": "audio", "mimeType": "audio/wav", "bytes": 16},  # not 18: "==" padding
        ],
    }


async def test_resources_become_short_descriptions_with_their_text() -> None:
    """Embedded text resources keep their text; blobs and links are described in one line."""
    result = await transform_result(
        types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(
                        uri="file:///r.txt", mime_type="text/plain", text="body"
                    ),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(
                        uri="file:///b.bin", mime_type="application/zip", blob="AAAA" * 10
                    ),
                ),
                types.ResourceLink(
                    type="resource_link",
                    name="big.log",
                    uri="file:///big.log",
                    mime_type="text/plain",
                    size=2048,
                    description="the full log",
                ),
            ]
        ),
        call=CALL,
        store=None,
    )
    assert output_of(result) == {
        "output": "[Resource <file:///r.txt> (text/plain)]\nbody\n"
        "[Resource <file:///b.bin> (application/zip): 30 bytes of binary data, not shown; it "
        "was not saved to a file (no artifact store is configured)]\n"
        "[Resource link: big.log <file:///big.log> (text/plain, 2,048 bytes)] the full log"
    }


def blob(uri: str, data: bytes | str, mime_type: str | None = None) -> types.EmbeddedResource:
    encoded = data if isinstance(data, str) else base64.b64encode(data).decode()
    return types.EmbeddedResource(
        type="resource",
        resource=types.BlobResourceContents(uri=uri, mime_type=mime_type, blob=encoded),
    )


async def test_binary_resources_are_persisted_as_artifacts_and_referenced(tmp_path: Path) -> None:
    """Blobs are decoded and written once, named by MIME type or magic number; the model
    gets their size and path. The text is not thereby persisted: no decision is made."""
    pdf = b"%PDF-1.4\n" + bytes(range(256)) * 4
    png = base64.b64decode(PNG)
    store = ArtifactStore(tmp_path)
    result = await transform_result(
        types.CallToolResult(
            content=[
                text("two files"),
                blob("file:///report", pdf, "application/pdf"),
                blob("file:///shot", png),
                blob("file:///broken", "not base64!"),
            ]
        ),
        call=CALL,
        store=store,
    )
    saved_pdf, saved_png = store.written
    assert (saved_pdf.suffix, saved_pdf.read_bytes()) == (".pdf", pdf)
    assert (saved_png.suffix, saved_png.read_bytes()) == (".png", png)
    assert output_of(result) == {
        "output": "two files\n"
        f"[Resource <file:///report> (application/pdf): 1,033 bytes of binary data, not shown; "
        f"saved to: {saved_pdf}]\n"
        f"[Resource <file:///shot>: 264 bytes of binary data, not shown; saved to: {saved_png}]\n"
        "[Resource <file:///broken>: 7 bytes of bad base64, not kept]"
    }
    assert result.persisted_output_files is None


async def test_structured_content_is_kept_for_display_and_used_when_there_is_no_text() -> None:
    """structuredContent goes to the display; alone, it is also the model's output."""
    with_text = await transform_result(
        types.CallToolResult(content=[text('{"n": 2}')], structured_content={"n": 2}),
        call=CALL,
        store=None,
    )
    assert output_of(with_text) == {"output": '{"n": 2}'}
    assert with_text.display == {"text": '{"n": 2}', "structuredContent": {"n": 2}}
    alone = await transform_result(
        types.CallToolResult(content=[], structured_content={"rows": ["a", "é"]}),
        call=CALL,
        store=None,
    )
    assert output_of(alone) == {"output": '{"rows": ["a", "é"]}'}


async def test_is_error_becomes_an_error_response_with_the_servers_message() -> None:
    """isError results fail with the server's text as the message."""
    result = await transform_result(
        types.CallToolResult(content=[text("disk not found")], is_error=True),
        call=CALL,
        store=None,
    )
    assert result.error is not None
    assert (result.error.message, result.error.type) == ("disk not found", "mcp_tool_error")
    assert response(result).status == "error"
    assert output_of(result) == {"error": "disk not found"}
    silent = await transform_result(
        types.CallToolResult(content=[], is_error=True), call=CALL, store=None
    )
    assert silent.error is not None
    assert "failed without a message" in silent.error.message


async def test_large_text_parts_are_persisted_once_together_and_previewed(
    tmp_path: Path,
) -> None:
    """Over the trigger: the whole output in one file, one ~2,000-char preview naming it."""
    store = ArtifactStore(tmp_path / "artifacts")
    big_a = "".join(f"a-line {i:05d}\n" for i in range(8000))
    big_b = "b" * 120_000
    result = await transform_result(
        types.CallToolResult(content=[text("short"), text(big_a), text(big_b)]),
        call=CALL,
        store=store,
        trigger_chars=100_000,
        preview_chars=2_000,
    )
    [path] = result.persisted_output_files or ()
    assert path.read_text() == f"short\n{big_a}\n{big_b}"
    assert store.written == (path,)
    output = output_of(result)
    assert isinstance(output, dict)
    text_out = output["output"]
    assert isinstance(text_out, str)
    assert text_out.startswith(f"Tool output truncated.\nFull output: {path}\n")
    assert text_out.count("Tool output truncated.") == 1
    assert "short\na-line 00000" in text_out
    assert len(text_out) < 2_000 + 400
    assert result.preview is not None
    assert result.display == {"text": f"short\n{big_a}\n{big_b}"}


async def test_the_same_call_persisting_again_reuses_its_file(tmp_path: Path) -> None:
    """Transforming the same result twice writes the artifact once."""
    store = ArtifactStore(tmp_path)
    mcp_result = types.CallToolResult(content=[text("x" * 5_000)])
    first = await transform_result(mcp_result, call=CALL, store=store, trigger_chars=1_000)
    second = await transform_result(mcp_result, call=CALL, store=store, trigger_chars=1_000)
    assert first.persisted_output_files == second.persisted_output_files
    assert len(store.written) == 1


async def test_without_a_store_large_text_is_shortened_with_no_file() -> None:
    """No artifact store: the preview says so and persisted_output_files is ()."""
    result = await transform_result(
        types.CallToolResult(content=[text("z" * 5_000)]),
        call=CALL,
        store=None,
        trigger_chars=1_000,
    )
    assert result.persisted_output_files == ()
    output = output_of(result)
    assert isinstance(output, dict)
    assert "no artifact store" in str(output["output"])
    assert len(str(output["output"])) < 2_300


@pytest.mark.parametrize("cap", ["file", "total"])
async def test_a_store_that_refuses_the_write_still_shortens_the_text(
    tmp_path: Path, cap: str
) -> None:
    """A cap or write failure is logged; the model still gets a bounded preview and ()."""
    store = (
        ArtifactStore(tmp_path, max_file_bytes=1_000)
        if cap == "file"
        else ArtifactStore(tmp_path, max_total_bytes=1_000)
    )
    result = await transform_result(
        types.CallToolResult(content=[text("q" * 50_000)]),
        call=CALL,
        store=store,
        trigger_chars=10_000,
    )
    assert result.persisted_output_files == ()
    assert "The full output was not saved: " in str(output_of(result))
    assert store.written == ()
    assert os.listdir(tmp_path) == []


async def test_large_parts_over_the_store_cap_are_not_marked_persisted(
    tmp_path: Path,
) -> None:
    """Listed files must hold every text the model does not see: when the output could not
    be written, the response lists no file (decided, no complete file) and says why."""
    store = ArtifactStore(tmp_path, max_total_bytes=60_000)
    result = await transform_result(
        types.CallToolResult(content=[text("a" * 50_000), text("b" * 50_000)]),
        call=CALL,
        store=store,
        trigger_chars=10_000,
    )
    assert store.written == ()  # the whole output is over the cap: nothing written
    assert result.persisted_output_files == ()
    assert "The full output was not saved: " in str(output_of(result))


async def test_a_full_disk_still_shortens_the_text(small_fs: Path) -> None:
    """ENOSPC on primary and fallback: the preview is sent without a path."""
    store = ArtifactStore(small_fs / "primary", fallback_dir=small_fs / "fallback")
    result = await transform_result(
        types.CallToolResult(content=[text("w" * 3_000_000)]), call=CALL, store=store
    )
    assert result.persisted_output_files == ()
    assert len(str(output_of(result))) < 2_500


async def test_a_preview_never_splits_a_surrogate_pair() -> None:
    """Previews cut on code points: an emoji at the cut stays whole."""
    emoji_text = "😀" * 3_000
    result = await transform_result(
        types.CallToolResult(content=[text(emoji_text)]), call=CALL, store=None, trigger_chars=1_000
    )
    str(output_of(result)).encode("utf-8")
    assert "😀" * 1_000 in str(output_of(result))  # the tail, about 80% of 2,000
