"""The model clients run a real two-turn loop through their SDKs against local fake APIs.

Each test checks the second request the fake received, the one carrying the tool results:
call ids paired and in order, tool text within the budget, the image where that API
expects it, and the WAV and the 30 MB image only as references. The whole request is
checked against the SDK's own create-params type.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest

import toolbatch
from tests.fake_model_apis import (
    Call,
    FakeApi,
    Recorded,
    anthropic_answer,
    chat_answer,
    fake_api,
    responses_answer,
)
from tests.providers._samples import b64, big_png, png, wav
from tests.providers._sdk import Sdk, assert_conforms
from toolbatch import InlineData, InlineDataPart, Part, TextPart
from toolbatch.agent import (
    AgentLoop,
    AnthropicModel,
    Model,
    ModelError,
    OpenAIChatModel,
    OpenAIResponsesModel,
)
from toolbatch.errors import ConfigError

# The SDKs' request types, imported on first use (seconds of CPU at collection otherwise).
CHAT_PARAMS = Sdk("openai.types.chat.completion_create_params")
RESPONSES_PARAMS = Sdk("openai.types.responses.response_create_params")
MESSAGES_PARAMS = Sdk("anthropic.types.message_create_params")
BUDGET = 5_000
SHOT = b64(png(64, 48))
CALLS: list[Call] = [
    ("call_seq", "run_shell_command", json.dumps({"command": "seq 1 50000"})),
    ("call_shot", "screenshot", "{}"),
    ("call_wav", "record", "{}"),
    ("call_big", "full_page", "{}"),
    ("call_bad", "screenshot", "{not json"),
]
IDS = [call_id for call_id, _, _ in CALLS]
_REFERENCE = re.compile(r"\[[^\[\]]*not sent: [^\[\]]*\]")


@toolbatch.tool(read_only=True)
def screenshot() -> list[Part]:
    """Take a screenshot of the page."""
    return [
        TextPart(text="the page"),
        InlineDataPart(inline_data=InlineData(mime_type="image/png", data=SHOT)),
    ]


@toolbatch.tool(read_only=True)
def record() -> list[Part]:
    """Record a second of sound."""
    return [
        TextPart(text="a chime"),
        InlineDataPart(inline_data=InlineData(mime_type="audio/wav", data=b64(wav()))),
    ]


@toolbatch.tool(read_only=True)
def full_page() -> list[Part]:
    """Take a screenshot of the whole page (about 30 MB)."""
    return [
        TextPart(text="the whole page"),
        InlineDataPart(inline_data=InlineData(mime_type="image/png", data=_big())),
    ]


_BIG: list[str] = []


def _big() -> str:
    if not _BIG:
        _BIG.append(b64(big_png()))
    return _BIG[0]


async def _run(model: Model) -> str:
    registry = toolbatch.default_registry()
    for tool in (screenshot, record, full_page):
        registry.register(tool)
    config = toolbatch.SchedulerConfig(batch_budget=BUDGET)
    async with toolbatch.ToolScheduler(registry, config) as scheduler:
        outcome = await AgentLoop(model, scheduler).prompt("look at the page")
    return outcome.text


def _within_budget(texts: list[str]) -> None:
    """The text the finalizer bounded, without the framing and references the API adds."""
    bounded = [_REFERENCE.sub("", text).replace("Error: ", "") for text in texts]
    assert sum(len(text) for text in bounded) <= BUDGET + 2 * len(texts)
    assert "50000" in texts[0]  # the tail of seq's output survived the preview


def _common(api: FakeApi, answer_text: str) -> Recorded:
    assert answer_text == "done: 5 results"
    assert len(api.requests) == 2
    second = api.requests[1]
    assert second.size < 200_000, "the 30 MB image was sent inline"
    dumped = json.dumps(second.body)
    assert "audio/wav;base64" not in dumped
    assert b64(wav())[:40] not in dumped
    return second


async def test_chat_client_sends_tool_messages_then_the_image_in_a_user_message() -> None:
    """Chat: one tool message per call in order; the image follows in a user message."""
    with fake_api(chat_answer(CALLS), prefix="/v1") as api:
        async with OpenAIChatModel(model="fake", base_url=api.url, api_key="sk-test") as model:
            text = await _run(model)
    second = _common(api, text)
    assert second.path == "/v1/chat/completions"
    assert second.headers["authorization"] == "Bearer sk-test"
    assert_conforms(second.body, CHAT_PARAMS.CompletionCreateParamsNonStreaming)
    messages = second.body["messages"]
    [assistant] = [m for m in messages if m["role"] == "assistant"]
    assert [c["id"] for c in assistant["tool_calls"]] == IDS
    tools = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == IDS
    assert messages.index(tools[-1]) == messages.index(assistant) + len(IDS)
    _within_budget([m["content"] for m in tools])
    content = {m["tool_call_id"]: m["content"] for m in tools}
    assert content["call_shot"] == "the page"
    assert "audio/wav" in content["call_wav"]
    assert "not valid JSON" in content["call_bad"]
    user = messages[-1]
    assert user["role"] == "user"
    images = [p for p in user["content"] if p["type"] == "image_url"]
    assert [i["image_url"]["url"] for i in images] == ["data:image/png;base64," + SHOT]


async def test_responses_client_sends_function_call_outputs_with_the_image_inside() -> None:
    """Responses: function_call items then one output per call; the image inside its output."""
    with fake_api(responses_answer(CALLS), prefix="/v1") as api:
        async with OpenAIResponsesModel(model="fake", base_url=api.url, api_key="sk-test") as model:
            text = await _run(model)
    second = _common(api, text)
    assert second.path == "/v1/responses"
    assert second.headers["authorization"] == "Bearer sk-test"
    assert second.body["store"] is False
    assert_conforms(second.body, RESPONSES_PARAMS.ResponseCreateParamsNonStreaming)
    items = second.body["input"]
    assert [i["call_id"] for i in items if i.get("type") == "function_call"] == IDS
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == IDS
    assert items.index(outputs[0]) > max(
        index for index, i in enumerate(items) if i.get("type") == "function_call"
    )
    output = {o["call_id"]: o["output"] for o in outputs}
    assert output["call_shot"] == [
        {"type": "input_text", "text": "the page"},
        {"type": "input_image", "image_url": "data:image/png;base64," + SHOT, "detail": "auto"},
    ]
    texts = [o if isinstance(o, str) else o[0]["text"] for o in output.values()]
    _within_budget(texts)
    assert "audio/wav" in output["call_wav"]
    assert "not valid JSON" in output["call_bad"]
    # Every call goes back exactly as the model sent it, the malformed one included.
    sent = {call_id: arguments for call_id, _, arguments in CALLS}
    back = {i["call_id"]: i["arguments"] for i in items if i.get("type") == "function_call"}
    assert back == sent


async def test_anthropic_client_sends_tool_results_first_with_the_image_inside() -> None:
    """Messages: tool_use then one user message of tool_result blocks, images inside."""
    with fake_api(anthropic_answer(CALLS)) as api:
        async with AnthropicModel(model="fake", base_url=api.url, api_key="sk-ant-test") as model:
            text = await _run(model)
    second = _common(api, text)
    assert second.path == "/v1/messages"
    # The SDK sends the key as x-api-key or, in newer versions, as a bearer token.
    assert "sk-ant-test" in second.headers.get("x-api-key", "") + second.headers.get(
        "authorization", ""
    )
    assert second.body["max_tokens"] == 8192
    assert_conforms(second.body, MESSAGES_PARAMS.MessageCreateParamsNonStreaming)
    user, assistant, results = second.body["messages"]
    assert (user["role"], assistant["role"], results["role"]) == ("user", "assistant", "user")
    assert [b["id"] for b in assistant["content"] if b["type"] == "tool_use"] == IDS
    blocks = results["content"]
    assert [b["tool_use_id"] for b in blocks] == IDS
    result = {b["tool_use_id"]: b for b in blocks}
    assert result["call_shot"]["content"] == [
        {"type": "text", "text": "the page"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": SHOT}},
    ]
    assert result["call_bad"]["is_error"] is True
    assert "is_error" not in result["call_seq"]
    _within_budget([b["content"][0]["text"] for b in blocks])
    assert "audio/wav" in result["call_wav"]["content"][1]["text"]


@pytest.mark.parametrize(
    ("make", "answer", "prefix", "status", "fix"),
    [
        pytest.param(
            lambda url: OpenAIChatModel(model="m", base_url=url, api_key="k"),
            chat_answer,
            "/v1",
            401,
            "OPENAI_API_KEY",
            id="chat-401",
        ),
        pytest.param(
            lambda url: OpenAIResponsesModel(model="m", base_url=url, api_key="k"),
            responses_answer,
            "/v1",
            404,
            "OPENAI_MODEL",
            id="responses-404",
        ),
        pytest.param(
            lambda url: AnthropicModel(model="m", base_url=url, api_key="k"),
            anthropic_answer,
            "",
            413,
            "too large",
            id="anthropic-413",
        ),
    ],
)
async def test_an_http_error_is_a_model_error_with_the_status_and_the_fix(
    make: Callable[[str], Any], answer: Any, prefix: str, status: int, fix: str
) -> None:
    """The status, the API's message and what to do, in one ModelError."""
    body = {"type": "error", "error": {"type": "some_error", "message": "the API says no"}}
    with fake_api(lambda _: (status, body), prefix=prefix) as api:
        async with make(api.url) as model:
            with pytest.raises(ModelError) as caught:
                await model.respond([], [])
    assert caught.value.status == status
    assert str(status) in str(caught.value)
    assert fix in str(caught.value)


async def test_a_reply_that_is_not_a_message_is_a_model_error() -> None:
    """A 200 that is not the API's reply shape is reported, not taken as "no calls"."""
    with fake_api(lambda _: (200, {"error": "proxy broke"}), prefix="/v1") as api:
        async with OpenAIChatModel(model="m", base_url=api.url, api_key="k") as model:
            with pytest.raises(ModelError, match="did not answer a chat completion"):
                await model.respond([], [])


async def test_a_failed_response_is_a_model_error() -> None:
    """A Responses reply with status failed says why instead of ending the turn silently."""
    failed = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": "failed",
        "error": {"code": "server_error", "message": "the model crashed"},
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    with fake_api(lambda _: (200, failed), prefix="/v1") as api:
        async with OpenAIResponsesModel(model="m", base_url=api.url, api_key="k") as model:
            with pytest.raises(ModelError, match="the model crashed"):
                await model.respond([], [])


@pytest.mark.parametrize(
    ("make", "variable"),
    [
        pytest.param(
            lambda: OpenAIResponsesModel(api_key="k"), "OPENAI_MODEL", id="responses-model"
        ),
        pytest.param(lambda: OpenAIResponsesModel(model="m"), "OPENAI_API_KEY", id="responses-key"),
        pytest.param(lambda: AnthropicModel(), "ANTHROPIC_MODEL", id="anthropic-model"),
    ],
)
def test_missing_settings_name_the_variable(
    make: Callable[[], Any], variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each client names the environment variable that would fix it."""
    for name in ("OPENAI_MODEL", "OPENAI_API_KEY", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=variable):
        make()


def test_the_clients_read_their_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_* and ANTHROPIC_* configure the clients, as they configure the SDKs."""
    monkeypatch.setenv("OPENAI_MODEL", "gpt-x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-x")
    responses = OpenAIResponsesModel()
    assert (responses.model, responses.api_key, responses.base_url) == (
        "gpt-x",
        "sk-env",
        "http://127.0.0.1:9/v1",
    )
    assert AnthropicModel().model == "claude-x"


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the anthropic package: a ConfigError saying which extra installs it."""
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what an absent package looks like
    with pytest.raises(ConfigError, match=r"pip install 'toolbatch\[anthropic\]'"):
        AnthropicModel(model="m")
