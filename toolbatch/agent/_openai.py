"""An OpenAI-compatible chat-completions model client (httpx, no SDK).

Configured like the OpenAI SDK: ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``),
``OPENAI_API_KEY`` and ``OPENAI_MODEL`` from the environment, or passed explicitly. Tool
declarations come from the registry; parallel tool calls are requested. History maps to
chat messages as follows: user text to ``user``; the model's text and calls to
``assistant`` with ``tool_calls``; each function response of a tool message to one ``tool``
message (its output, or ``Error: <error>``); top-level text in a tool message (hook context)
joins the last tool message; media returned by tools follows as one ``user`` message of
image parts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

import anyio
import httpx
import structlog

from toolbatch._wire import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolDeclaration,
)
from toolbatch.agent._messages import Message, ModelReply, text_of
from toolbatch.errors import ConfigError, ToolbatchError

__all__ = ["DEFAULT_OPENAI_BASE_URL", "ModelError", "OpenAIChatModel"]

log = structlog.get_logger("toolbatch.agent.openai")

DEFAULT_OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
REQUEST_TIMEOUT_S: Final = 120.0
RETRIES: Final = 2
RETRY_BACKOFF_S: Final = 0.5
_RETRY_STATUS: Final = frozenset({408, 409, 429, 500, 502, 503, 504})


class ModelError(ToolbatchError):
    """The model endpoint failed or answered something that is not a chat completion."""


def _tool_content(response: Mapping[str, Any]) -> str:
    output = response.get("output")
    error = response.get("error")
    pieces = []
    if isinstance(output, str):
        pieces.append(output)
    elif output is not None:
        pieces.append(json.dumps(output, ensure_ascii=False))
    if isinstance(error, str):
        pieces.append(f"Error: {error}")
    elif error is not None:
        pieces.append("Error: " + json.dumps(error, ensure_ascii=False))
    rest = {k: v for k, v in response.items() if k not in ("output", "error")}
    if rest:
        pieces.append(json.dumps(rest, ensure_ascii=False))
    return "\n".join(pieces)


def to_chat_messages(history: Sequence[Message], system: str | None = None) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for ``history``."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for message in history:
        if message.role == "user":
            messages.append({"role": "user", "content": text_of(message.parts)})
        elif message.role == "model":
            entry: dict[str, Any] = {"role": "assistant", "content": text_of(message.parts) or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": json.dumps(call.args, ensure_ascii=False),
                        },
                    }
                    for call in message.tool_calls
                ]
            messages.append(entry)
        else:
            images: list[dict[str, Any]] = []
            for part in message.parts:
                if isinstance(part, FunctionResponsePart):
                    body = part.function_response
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": body.id,
                            "content": _tool_content(body.response),
                        }
                    )
                elif isinstance(part, TextPart) and messages and messages[-1]["role"] == "tool":
                    messages[-1]["content"] += "\n\n" + part.text
                elif isinstance(part, InlineDataPart):
                    url = f"data:{part.inline_data.mime_type};base64,{part.inline_data.data}"
                    images.append({"type": "image_url", "image_url": {"url": url}})
                elif isinstance(part, FileDataPart):
                    images.append(
                        {"type": "image_url", "image_url": {"url": part.file_data.file_uri}}
                    )
            if images:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Media returned by the tools:"},
                            *images,
                        ],
                    }
                )
    return messages


def to_chat_tools(tools: Sequence[ToolDeclaration]) -> list[dict[str, Any]]:
    """The chat-completions ``tools`` for the declarations."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def parse_reply(body: object) -> ModelReply:
    """A ``ModelReply`` from a chat-completions response body.

    Raises:
        ModelError: the body is not a chat completion.
    """
    try:
        assert isinstance(body, dict)
        message = body["choices"][0]["message"]
        assert isinstance(message, dict)
    except (AssertionError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(
            f"the endpoint's answer is not a chat completion: {json.dumps(body)[:300]}"
        ) from exc
    calls: list[ToolCall] = []
    invalid: dict[str, str] = {}
    for index, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") or {}
        call_id = str(raw.get("id") or f"call_{index}")
        name = str(function.get("name") or "")
        arguments = function.get("arguments") or "{}"
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
            if not isinstance(args, dict):
                raise ValueError(f"arguments must be a JSON object, got {type(args).__name__}")
        except ValueError as exc:
            invalid[call_id] = (
                f"its arguments are not a JSON object ({exc}): {str(arguments)[:200]!r}"
            )
            args = {}
        calls.append(ToolCall(id=call_id, name=name, args=args, ordinal=index))
    content = message.get("content")
    return ModelReply(
        text=content if isinstance(content, str) else "",
        tool_calls=calls,
        invalid_calls=invalid,
    )


class OpenAIChatModel:
    """A chat-completions client; an async context manager owning its HTTP client.

    Args:
        model: the model name (default ``$OPENAI_MODEL``).
        base_url: the API base (default ``$OPENAI_BASE_URL`` or OpenAI's).
        api_key: the bearer key (default ``$OPENAI_API_KEY``; may be empty for local
            servers).
        system: an optional system prompt.
        timeout_s: seconds per request.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        system: str | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.model = model or os.environ.get("OPENAI_MODEL", "")
        if not self.model:
            raise ConfigError("no model name: pass OpenAIChatModel(model=...) or set OPENAI_MODEL")
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        ).rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OPENAI_BASE_URL must be an http(s) URL, got {self.base_url!r}")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.system = system
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Self:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=self._timeout_s
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        """One chat-completions request; retried on 429/5xx and connection errors."""
        if self._client is None:
            raise RuntimeError("use the model as `async with OpenAIChatModel(...) as model:`")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": to_chat_messages(history, self.system),
        }
        if tools:
            payload["tools"] = to_chat_tools(tools)
            payload["parallel_tool_calls"] = True
        last_error = ""
        for attempt in range(RETRIES + 1):
            if attempt:
                await anyio.sleep(RETRY_BACKOFF_S * 2 ** (attempt - 1))
            try:
                response = await self._client.post("/chat/completions", json=payload)
            except httpx.TransportError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS:
                last_error = f"HTTP {response.status_code}: {response.text[:300]}"
                continue
            if response.status_code != 200:
                raise ModelError(
                    f"{self.base_url}/chat/completions answered HTTP {response.status_code}: "
                    f"{response.text[:500]}"
                )
            try:
                body = response.json()
            except ValueError as exc:
                raise ModelError(
                    f"the endpoint's answer is not JSON: {response.text[:300]!r}"
                ) from exc
            return parse_reply(body)
        raise ModelError(
            f"{self.base_url}/chat/completions failed after {RETRIES + 1} attempts: {last_error}"
        )
