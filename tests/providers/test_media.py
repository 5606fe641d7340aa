"""Media strings a mapping is handed directly (not through the finalizer) stay bounded."""

from __future__ import annotations

import json
from types import ModuleType

import pytest

from tests.providers._samples import inline, media_turn, png
from toolbatch import FileData, FileDataPart
from toolbatch.providers import anthropic, gemini, openai_chat, openai_responses

MAPPINGS = [
    pytest.param(mapping, id=mapping.__name__.rsplit(".", 1)[1])
    for mapping in (anthropic, gemini, openai_chat, openai_responses)
]


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize(
    "part",
    [
        pytest.param(inline("image/png" + "x" * 2_000_000, png()), id="2m-char-inline-mime"),
        pytest.param(
            FileDataPart(
                file_data=FileData(mime_type="image/png", file_uri="gs://b/" + "u" * 2_000_000)
            ),
            id="2m-char-file-uri",
        ),
        pytest.param(
            FileDataPart(
                file_data=FileData(mime_type="video/" + "m" * 2_000_000, file_uri="gs://b/v")
            ),
            id="2m-char-file-mime",
        ),
    ],
)
def test_an_overlong_media_string_is_never_sent(mapping: ModuleType, part: object) -> None:
    """A 2,000,000-character MIME type or URI becomes a short reference saying why."""
    request = json.dumps(mapping.tool_results(media_turn(part)))  # type: ignore[arg-type]
    assert len(request) < 2_000
    assert "not sent" in request
