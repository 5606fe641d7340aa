"""Invariants of every API's mapping, hammered with hypothesis.

For any turn: one result per function response, ids paired, order kept; every output
validates against the SDK's types; each media part is either sent, in a type the API
takes and within its limits (across the earlier turns of the request too), or replaced by
a reference; the input is never changed and the output is deterministic. For any reply:
one call per call the model made, invalid exactly when its arguments are not an object.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.providers._sdk import anthropic_sdk, assert_conforms, chat_sdk, genai, responses_sdk
from tests.providers.strategies import arguments, payload_of, turns
from tests.strategies import scaled
from toolbatch import FunctionResponsePart, InlineDataPart, Part
from toolbatch.errors import ReplyShapeError
from toolbatch.providers import anthropic, gemini, openai_chat, openai_responses

HAMMER = settings(
    max_examples=scaled(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Sent:
    """One media part the API receives inline: its type and its base64 data."""

    mime: str
    data: str
    inline: bool = True


def _data_url(url: str) -> Sent:
    head, data = url.split(",", 1)
    return Sent(head.removeprefix("data:").removesuffix(";base64"), data)


def _chat(output: list[dict[str, Any]]) -> tuple[list[str], list[Sent]]:
    ids = [m["tool_call_id"] for m in output if m["role"] == "tool"]
    sent = [
        _data_url(p["image_url"]["url"])
        for m in output
        if m["role"] == "user"
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    return ids, sent


def _responses(output: list[dict[str, Any]]) -> tuple[list[str], list[Sent]]:
    ids = [i["call_id"] for i in output if i["type"] == "function_call_output"]
    pieces = [
        p
        for i in output
        for p in (i["output"] if i["type"] == "function_call_output" else i["content"])
        if isinstance(p, dict)
    ]
    return ids, [_data_url(p["image_url"]) for p in pieces if p["type"] == "input_image"]


def _anthropic(output: list[dict[str, Any]]) -> tuple[list[str], list[Sent]]:
    blocks = [b for m in output for b in m["content"]]
    kinds = [b["type"] for b in blocks]
    results = kinds.count("tool_result")
    assert kinds[:results] == ["tool_result"] * results, "tool_result blocks must come first"
    nested = [c for b in blocks for c in b.get("content", [])] + blocks
    sent = [
        Sent(b["source"]["media_type"], b["source"]["data"]) for b in nested if b["type"] == "image"
    ]
    return [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"], sent


def _gemini(output: list[dict[str, Any]]) -> tuple[list[str], list[Sent]]:
    ids = [p["functionResponse"]["id"] for p in output if "functionResponse" in p]
    sent = [
        Sent(p["inlineData"]["mimeType"], p["inlineData"]["data"])
        for p in output
        if "inlineData" in p
    ]
    sent += [Sent(p["fileData"]["mimeType"], "", inline=False) for p in output if "fileData" in p]
    return ids, sent


@dataclass(frozen=True)
class Api:
    module: Any
    read: Callable[[list[dict[str, Any]]], tuple[list[str], list[Sent]]]
    validate: Callable[[dict[str, Any]], None]
    size: Callable[[Sent], int]

    def __str__(self) -> str:
        return self.module.__name__.rsplit(".", 1)[1]


def _url_size(sent: Sent) -> int:
    return len(f"data:{sent.mime};base64,") + len(sent.data)


MODULES = [openai_chat, openai_responses, anthropic, gemini]


def _name(module: Any) -> str:
    return str(module.__name__.rsplit(".", 1)[1])


APIS = [
    Api(
        openai_chat,
        _chat,
        lambda m: assert_conforms(m, chat_sdk.ChatCompletionMessageParam),
        _url_size,
    ),
    Api(
        openai_responses,
        _responses,
        lambda i: assert_conforms(i, responses_sdk.ResponseInputItemParam),
        _url_size,
    ),
    Api(
        anthropic,
        _anthropic,
        lambda m: assert_conforms(m, anthropic_sdk.MessageParam),
        lambda s: len(s.data),
    ),
    Api(gemini, _gemini, lambda p: genai.Part.model_validate(p) and None, lambda s: len(s.data)),
]


def _media_count(parts: Sequence[Part]) -> int:
    return sum(not isinstance(p, FunctionResponsePart) and not hasattr(p, "text") for p in parts)


@pytest.mark.parametrize("api", APIS, ids=str)
@HAMMER
@given(history=st.lists(turns(), min_size=1, max_size=2))
def test_every_result_is_paired_valid_and_within_the_apis_media_rules(
    api: Api, history: list[list[Part]]
) -> None:
    """Ids paired in order, SDK-valid, media sent only as the API takes them, rest referenced."""
    rules = api.module.MEDIA_RULES
    request_chars = 0
    request_items = 0
    for index, parts in enumerate(history):
        before = copy.deepcopy(parts)
        output = api.module.tool_results(parts, earlier=history[:index])
        assert parts == before, "the input changed"
        assert api.module.tool_results(parts, earlier=history[:index]) == output

        ids, sent = api.read(output)
        assert ids == [p.function_response.id for p in parts if isinstance(p, FunctionResponsePart)]
        for item in output:
            api.validate(item)
        references = json.dumps(output, ensure_ascii=False).count("not sent: ")
        assert len(sent) + references == _media_count(parts)
        for media in (media for media in sent if media.inline):
            assert media.mime.lower().split(";")[0] in rules.accepted | {"image/jpg"}
            assert api.size(media) <= rules.max_item_chars
            size_px = payload_of(media.data).size_px
            if rules.max_side_px is not None and size_px is not None:
                assert max(size_px) <= rules.max_side_px
        request_chars += sum(api.size(media) for media in sent if media.inline)
        request_items += sum(media.inline for media in sent)
        assert request_chars <= rules.max_request_chars
        assert request_items <= rules.max_request_items


@pytest.mark.parametrize("api", APIS, ids=str)
@HAMMER
@given(parts=turns(max_calls=3))
def test_media_never_reaches_an_api_in_a_type_it_rejects(api: Api, parts: list[Part]) -> None:
    """Audio only for Gemini; images only in the types each API lists."""
    _, sent = api.read(api.module.tool_results(parts))
    for media in sent:
        if api.module is not gemini:
            assert media.mime in {"image/png", "image/jpeg", "image/gif", "image/webp"}
    inline_types = {p.inline_data.mime_type for p in parts if isinstance(p, InlineDataPart)}
    if api.module is not gemini:
        assert not any(m.mime.startswith("audio/") for m in sent), inline_types


def _reply(api: Any, calls: list[tuple[str, str, str]]) -> object:
    if api is openai_chat:
        return {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
        }
    if api is openai_responses:
        return {
            "output": [
                {"type": "function_call", "call_id": i, "name": n, "arguments": a}
                for i, n, a in calls
            ]
        }
    if api is anthropic:
        return {
            "content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        }
    return [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return text == ""


@pytest.mark.parametrize("api", MODULES, ids=_name)
@settings(max_examples=scaled(50), deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["a", "b", "toolu_1"]), st.sampled_from(["f", "g"]), arguments()),
        max_size=5,
    )
)
def test_every_call_comes_back_invalid_exactly_when_its_arguments_are_not_an_object(
    api: Any, calls: list[tuple[str, str, str]]
) -> None:
    """One ToolCall per call, in order, ids kept; bad arguments make it invalid, never raise."""
    found = api.tool_calls(_reply(api, calls))
    assert [(c.id, c.name, c.ordinal) for c in found] == [
        (i, n, k) for k, (i, n, _) in enumerate(calls)
    ]
    for call, (_, _, raw) in zip(found, calls, strict=True):
        assert (call.invalid is None) == _is_object(raw), (raw, call.invalid)
        if call.invalid is None and raw:
            assert call.args == json.loads(raw)
        else:
            assert call.args == {}


_anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "message",
                    "tool_calls",
                    "output",
                    "content",
                    "candidates",
                    "parts",
                    "functionCall",
                    "type",
                    "function",
                    "arguments",
                    "input",
                    "args",
                    "id",
                    "name",
                    "role",
                    "call_id",
                    "tool_use",
                    "function_call",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("api", MODULES, ids=_name)
@settings(max_examples=scaled(100), deadline=None)
@given(reply=_anything)
def test_any_reply_gives_calls_or_a_value_error(api: Any, reply: object) -> None:
    """Whatever arrives, tool_calls returns calls or raises ReplyShapeError naming the shape."""
    try:
        found = api.tool_calls(reply)
    except ReplyShapeError as exc:  # a ToolbatchError (and a ValueError), never a bare one
        message = str(exc)
    else:
        message = "reply: expected"
        assert all(call.id for call in found)
    assert "reply: expected" in message
