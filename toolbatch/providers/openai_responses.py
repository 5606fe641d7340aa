"""OpenAI Responses: tool calls from a reply, a turn as input items, tools as functions.

``tool_results`` gives one ``function_call_output`` item per function response, in call
order: ``output`` is the call's text, or, when images go with it, a list of ``input_text``
and ``input_image`` (the API takes images in function output). Batch text (hook context,
the stop reason) follows as one ``user`` message. Media the API cannot take (audio, other
types, images over its limits, ``fileData``) become text references. See ``README.md`` here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from toolbatch._core import InlineDataPart, TextPart, ToolCall, ToolDeclaration
from toolbatch.providers._batch import (
    HasDeclarations,
    MediaPart,
    Source,
    declarations_of,
    group,
    response_text,
)
from toolbatch.providers._calls import as_list, field, make_call, plain, reply_shape_error, with_ids
from toolbatch.providers._media import MediaAllowance, MediaRules
from toolbatch.providers._openai import (
    IMAGE_TYPES as IMAGE_TYPES,
    MAX_IMAGE_URL_CHARS as MAX_IMAGE_URL_CHARS,
    MAX_REQUEST_IMAGE_CHARS as MAX_REQUEST_IMAGE_CHARS,
    MAX_REQUEST_IMAGES as MAX_REQUEST_IMAGES,
    data_url,
    openai_rules,
)

__all__ = [
    "tool_calls",
    "tool_definitions",
    "tool_results",
]

MEDIA_RULES: Final[MediaRules] = openai_rules("the OpenAI Responses API")
"""Images only (inside ``function_call_output``); see ``toolbatch.providers``."""

_OTHER_CALLS: Final = frozenset({"custom_tool_call"})
"""Calls the client must answer that are not function calls (never declared by toolbatch)."""


def tool_calls(reply: object) -> list[ToolCall]:
    """The ``function_call`` items of a response's ``output``, in order.

    Takes the SDK's ``Response``, its dict, or the ``output`` list itself. ``ToolCall.id`` is
    the item's ``call_id`` (what ``function_call_output`` answers). A call whose arguments
    are not a JSON object comes back with ``invalid`` set; no call is dropped. Other items
    (messages, reasoning, server-side tools) are not calls to run.

    Raises:
        ReplyShapeError: (a ValueError) ``reply`` is not a response or a list of output items.
    """
    body = plain(reply)
    if isinstance(body, Mapping) and "output" in body:
        items = as_list(body["output"])
    elif isinstance(body, list):
        items = body
    else:
        raise reply_shape_error("a Responses", "a response with 'output'", body)
    calls: list[ToolCall] = []
    for item in items:
        entry = plain(item)
        ordinal = len(calls)
        if not isinstance(entry, Mapping):
            calls.append(
                make_call(
                    None, None, None, ordinal, invalid=f"the item is not an object: {entry!r:.80}"
                )
            )
        elif entry.get("type") == "function_call":
            calls.append(
                make_call(
                    field(entry, "call_id", "id"),
                    entry.get("name"),
                    entry.get("arguments"),
                    ordinal,
                )
            )
        elif isinstance(entry.get("type"), str) and entry["type"] in _OTHER_CALLS:
            calls.append(
                make_call(
                    field(entry, "call_id", "id"),
                    entry.get("name"),
                    None,
                    ordinal,
                    invalid=f"it is a {entry['type']!r}; toolbatch declares function tools only",
                )
            )
    return with_ids(calls)


def _image(part: InlineDataPart, mime: str) -> dict[str, Any]:
    url = data_url(mime, part.inline_data.data)
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _text(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def tool_results(turn: Source, /, *, earlier: Sequence[Source] = ()) -> list[dict[str, Any]]:
    """A finalized turn (or a tool message's parts) as Responses input items, in call order.

    Args:
        turn: the turn, or the parts of a recorded tool message.
        earlier: the tool turns already in the same request, oldest first: their images
            count against the request's limits before this turn's.
    """
    batch = group(turn)
    allowance = MediaAllowance(MEDIA_RULES)
    allowance.admit_earlier(earlier)
    items: list[dict[str, Any]] = []
    for call in batch.calls:
        text = response_text(call.response)
        pieces: list[dict[str, Any]] = [_text(text)] if text else []
        has_image = False
        for media in call.media:
            decision = allowance.admit(media)
            if isinstance(decision, str):
                pieces.append(_text(decision))
            elif isinstance(media, InlineDataPart):
                pieces.append(_image(media, decision.mime))
                has_image = True
        output: str | list[dict[str, Any]] = (
            pieces if has_image else "\n".join(piece["text"] for piece in pieces)
        )
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": output})
    content = [piece for extra in batch.extras for piece in _extra(extra, allowance)]
    if content:
        items.append({"type": "message", "role": "user", "content": content})
    return items


def _extra(part: TextPart | MediaPart, allowance: MediaAllowance) -> list[dict[str, Any]]:
    if isinstance(part, TextPart):
        return [_text(part.text)] if part.text else []
    decision = allowance.admit(part)
    if isinstance(decision, str):
        return [_text(decision)]
    assert isinstance(part, InlineDataPart)  # only Gemini takes fileData as it is
    return [_image(part, decision.mime)]


def tool_definitions(tools: HasDeclarations | Iterable[ToolDeclaration]) -> list[dict[str, Any]]:
    """The declarations of a registry (or the declarations given) as Responses ``tools``.

    ``strict`` is off: toolbatch's schemas have optional arguments, which strict mode
    does not allow.
    """
    return [
        {
            "type": "function",
            "name": declaration.name,
            "description": declaration.description,
            "parameters": declaration.input_schema,
            "strict": False,
        }
        for declaration in declarations_of(tools)
    ]
