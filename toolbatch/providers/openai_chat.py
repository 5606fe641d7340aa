"""OpenAI Chat Completions: tool calls from a reply, a turn as messages, tools as functions.

``tool_results`` gives one ``{"role": "tool", "tool_call_id", "content": str}`` message per
function response, in call order, then, when the turn has images or batch text (hook
context, the stop reason), one ``user`` message carrying them: tool messages take text only.
Media the API cannot take (audio, other types, images over its limits, ``fileData``) are
replaced by a text reference in the call's own tool message. See ``README.md`` here.
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
from toolbatch.providers._calls import as_list, make_call, plain, reply_shape_error, with_ids
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

MEDIA_RULES: Final[MediaRules] = openai_rules("the OpenAI Chat API")
"""Images only (in the user message after the tool messages); see ``toolbatch.providers``."""


def tool_calls(reply: object) -> list[ToolCall]:
    """The tool calls of a chat completion (or of its ``choices[0].message``), in order.

    Takes the SDK's ``ChatCompletion`` / ``ChatCompletionMessage`` or their dicts. A call
    whose arguments are not a JSON object, or that is not a function call, comes back with
    ``invalid`` set (the scheduler answers it with an error); no call is dropped.

    Raises:
        ReplyShapeError: (a ValueError) ``reply`` is not a chat completion or an assistant message.
    """
    body = plain(reply)
    if not isinstance(body, Mapping):
        raise reply_shape_error("a Chat Completions", "a completion or a message", body)
    if "choices" in body:
        choices = as_list(body["choices"])
        if not choices:
            return []
        choice = plain(choices[0])
        message = choice.get("message") if isinstance(choice, Mapping) else None
        if not isinstance(message, Mapping):
            raise reply_shape_error("a Chat Completions", "choices[0].message", body)
    elif {"role", "content", "tool_calls"} & body.keys():
        message = body
    else:
        raise reply_shape_error("a Chat Completions", "a completion or a message", body)
    return with_ids(
        [_call(entry, ordinal) for ordinal, entry in enumerate(as_list(message.get("tool_calls")))]
    )


def _call(entry: object, ordinal: int) -> ToolCall:
    if not isinstance(entry, Mapping):
        return make_call(
            None, None, None, ordinal, invalid=f"the call is not an object: {entry!r:.80}"
        )
    kind = entry.get("type", "function")
    if kind == "function":
        function = entry.get("function")
        if not isinstance(function, Mapping):
            return make_call(
                entry.get("id"), None, None, ordinal, invalid="the call has no function"
            )
        return make_call(entry.get("id"), function.get("name"), function.get("arguments"), ordinal)
    body = entry.get(kind) if isinstance(kind, str) else None
    name = body.get("name") if isinstance(body, Mapping) else None
    return make_call(
        entry.get("id"),
        name,
        None,
        ordinal,
        invalid=f"it is a {kind!r} tool call; toolbatch declares function tools only",
    )


def _image(part: InlineDataPart, mime: str) -> dict[str, Any]:
    url = data_url(mime, part.inline_data.data)
    return {"type": "image_url", "image_url": {"url": url}}


def _join(*texts: str) -> str:
    return "\n".join(text for text in texts if text)


def tool_results(turn: Source, /, *, earlier: Sequence[Source] = ()) -> list[dict[str, Any]]:
    """A finalized turn (or a tool message's parts) as chat messages, in call order.

    Args:
        turn: the turn, or the parts of a recorded tool message.
        earlier: the tool turns already in the same request, oldest first: their images
            count against the request's limits before this turn's.
    """
    batch = group(turn)
    allowance = MediaAllowance(MEDIA_RULES)
    allowance.admit_earlier(earlier)
    messages: list[dict[str, Any]] = []
    user: list[dict[str, Any]] = []
    for call in batch.calls:
        references: list[str] = []
        images: list[dict[str, Any]] = []
        for media in call.media:
            decision = allowance.admit(media)
            if isinstance(decision, str):
                references.append(decision)
            elif isinstance(media, InlineDataPart):
                images.append(_image(media, decision.mime))
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call.call_id,
                "content": _join(response_text(call.response), *references),
            }
        )
        if images:
            label = f"Images returned by tool call {call.call_id} ({call.name}):"
            user.extend([{"type": "text", "text": label}, *images])
    for extra in batch.extras:
        user.extend(_extra(extra, allowance))
    if user:
        messages.append({"role": "user", "content": user})
    return messages


def _extra(part: TextPart | MediaPart, allowance: MediaAllowance) -> list[dict[str, Any]]:
    if isinstance(part, TextPart):
        return [{"type": "text", "text": part.text}] if part.text else []
    decision = allowance.admit(part)
    if isinstance(decision, str):
        return [{"type": "text", "text": decision}]
    assert isinstance(part, InlineDataPart)  # only Gemini takes fileData as it is
    return [_image(part, decision.mime)]


def tool_definitions(tools: HasDeclarations | Iterable[ToolDeclaration]) -> list[dict[str, Any]]:
    """The declarations of a registry (or the declarations given) as chat ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": declaration.name,
                "description": declaration.description,
                "parameters": declaration.input_schema,
            },
        }
        for declaration in declarations_of(tools)
    ]
