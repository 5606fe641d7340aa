"""Gemini: tool calls from a reply, a turn as parts, tools as function declarations.

toolbatch's parts are Gemini's, so ``tool_results`` gives the turn's parts as they are
(``functionResponse``, then its ``inlineData`` / ``fileData`` parts, then the batch text),
except media the API cannot take, which become ``text`` parts holding a reference.

Limits (ecosystem-2 §6 ◐): a request holds at most 20 MB inline (Firebase AI Logic
input-file-requirements; text included), so inline media get 16 MB and 4 MB stay for text
(a 1M-token context holds about 4 MB of text); at most 3,000 images. Media types: the
image, audio, video and document types of the Gemini API docs (ai.google.dev/gemini-api/docs
image-understanding, audio, video, document-processing; not re-read here ✘).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolDeclaration,
)
from toolbatch.providers._batch import HasDeclarations, Source, declarations_of, group, parts_of
from toolbatch.providers._calls import as_list, field, make_call, plain, reply_shape_error, with_ids
from toolbatch.providers._media import MediaAllowance, MediaRules

__all__ = [
    "tool_calls",
    "tool_definitions",
    "tool_results",
]

MEDIA_TYPES: Final = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/webp",
        "image/heic",
        "image/heif",
        "audio/wav",
        "audio/mp3",
        "audio/mpeg",
        "audio/aiff",
        "audio/aac",
        "audio/ogg",
        "audio/flac",
        "video/mp4",
        "video/mpeg",
        "video/mov",
        "video/avi",
        "video/x-flv",
        "video/mpg",
        "video/webm",
        "video/wmv",
        "video/3gpp",
        "application/pdf",
        "text/plain",
    }
)
_PARTS: Final = (TextPart, FunctionResponsePart, InlineDataPart, FileDataPart)
MAX_REQUEST_INLINE_CHARS: Final = 16_000_000
MAX_REQUEST_INLINE_PARTS: Final = 3000

MEDIA_RULES: Final = MediaRules(
    api="the Gemini API",
    accepted=MEDIA_TYPES,
    type_names="PNG, JPEG, WebP, HEIC and HEIF",
    max_item_chars=MAX_REQUEST_INLINE_CHARS,
    max_request_chars=MAX_REQUEST_INLINE_CHARS,
    max_request_items=MAX_REQUEST_INLINE_PARTS,
    file_uris=True,
)
"""Images, audio, video and PDF inline; ``fileData`` as it is; see the limits above."""


def tool_calls(reply: object) -> list[ToolCall]:
    """The ``functionCall`` parts of a reply, in order.

    Takes a ``GenerateContentResponse`` (its first candidate), a ``Content``, their dicts
    (camelCase or snake_case), or the ``parts`` list itself. A call without an ``id`` gets
    ``call_<n>``; one whose ``args`` are not an object comes back with ``invalid`` set.

    Raises:
        ReplyShapeError: (a ValueError) ``reply`` is none of those shapes.
    """
    body = plain(reply)
    if isinstance(body, Mapping) and "candidates" in body:
        candidates = as_list(body["candidates"])
        candidate = plain(candidates[0]) if candidates else {}
        content = candidate.get("content") if isinstance(candidate, Mapping) else None
        if content is None:
            return []  # no candidate, or one without content (blocked, say)
        body = plain(content)
    if isinstance(body, Mapping) and "parts" in body:
        parts = as_list(body["parts"])
    elif isinstance(body, list):
        parts = body
    else:
        raise reply_shape_error("a Gemini", "a response, a content or its parts", body)
    calls: list[ToolCall] = []
    for part in parts:
        entry = plain(part)
        call = field(entry, "functionCall", "function_call") if isinstance(entry, Mapping) else None
        if isinstance(call, Mapping):
            calls.append(make_call(call.get("id"), call.get("name"), call.get("args"), len(calls)))
        elif call is not None:
            calls.append(
                make_call(
                    None, None, None, len(calls), invalid=f"the call is not an object: {call!r:.80}"
                )
            )
    return with_ids(calls)


def tool_results(turn: Source, /, *, earlier: Sequence[Source] = ()) -> list[dict[str, Any]]:
    """A finalized turn (or a tool message's parts) as Gemini parts, in order.

    Args:
        turn: the turn, or the parts of a recorded tool message.
        earlier: the tool turns already in the same request, oldest first: their media
            count against the request's limits before this turn's.
    """
    allowance = MediaAllowance(MEDIA_RULES)
    allowance.admit_earlier(earlier)
    results: list[dict[str, Any]] = []
    for part in parts_of(turn):
        if not isinstance(part, _PARTS):
            group([part])  # raises the TypeError that names the part
        if isinstance(part, InlineDataPart | FileDataPart):
            decision = allowance.admit(part)
            if isinstance(decision, str):
                results.append({"text": decision})
                continue
            if isinstance(part, InlineDataPart) and decision.mime != part.inline_data.mime_type:
                # The bytes' real type (a PNG labelled image/jpeg), or image/jpg spelt right.
                fixed = {"mimeType": decision.mime, "data": part.inline_data.data}
                results.append({"inlineData": fixed})
                continue
        results.append(part.model_dump(mode="json"))
    return results


def tool_definitions(tools: HasDeclarations | Iterable[ToolDeclaration]) -> list[dict[str, Any]]:
    """The declarations as Gemini ``tools``: one tool of ``functionDeclarations`` (or none).

    Schemas go in ``parametersJsonSchema``, which takes JSON Schema as it is (``parameters``
    takes only an OpenAPI subset, without ``$defs`` and the like).
    """
    declarations = [
        {
            "name": declaration.name,
            "description": declaration.description,
            "parametersJsonSchema": declaration.input_schema,
        }
        for declaration in declarations_of(tools)
    ]
    return [{"functionDeclarations": declarations}] if declarations else []
