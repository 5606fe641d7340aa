"""An OpenAI-compatible Chat Completions model client (httpx, no SDK needed).

Configured like the OpenAI SDK: ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``),
``OPENAI_API_KEY`` and ``OPENAI_MODEL`` from the environment, or passed explicitly. It speaks
plain HTTP so that it needs no extra and works with any compatible server (vLLM, llama.cpp,
an empty key). Tool declarations come from the registry; parallel tool calls are requested.
History maps to chat messages through ``toolbatch.providers.openai_chat``: user text to
``user``; the model's text and calls to ``assistant`` with ``tool_calls``; a tool message to
one ``tool`` message per function response, then one ``user`` message with the images and
the batch's text (hook context, the stop reason). Audio and oversized images are sent as
references to the saved file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final, Self

import anyio
import httpx
import structlog

from toolbatch._core import Part, ToolDeclaration
from toolbatch.agent._clients import REQUEST_TIMEOUT_S, RETRIES, http_error, model_name, unreachable
from toolbatch.agent._messages import Message, ModelReply, text_of
from toolbatch.errors import ConfigError, ModelError
from toolbatch.providers import openai_chat

__all__ = ["DEFAULT_OPENAI_BASE_URL", "ModelError", "OpenAIChatModel", "chat_messages"]

log = structlog.get_logger("toolbatch.agent.openai")

DEFAULT_OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
RETRY_BACKOFF_S: Final = 0.5
_RETRY_STATUS: Final = frozenset({408, 409, 429, 500, 502, 503, 504})


def chat_messages(history: Sequence[Message], system: str | None = None) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for ``history``."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    earlier: list[Sequence[Part]] = []
    for message in history:
        if message.role == "user":
            messages.append({"role": "user", "content": text_of(message.parts)})
        elif message.role == "model":
            text = text_of(message.parts)
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if message.tool_calls:
                entry["content"] = text or None
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
            messages.extend(openai_chat.tool_results(message.parts, earlier=earlier))
            earlier.append(message.parts)
    return messages


def _reply(body: object, where: str) -> ModelReply:
    try:
        calls = openai_chat.tool_calls(body)
    except ValueError as exc:
        raise ModelError(f"{where} did not answer a chat completion: {exc}") from exc
    text = ""
    if isinstance(body, dict) and body.get("choices"):
        message = body["choices"][0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        text = content if isinstance(content, str) else ""
    return ModelReply(text=text, tool_calls=calls)


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
        self.model = model_name(model, "OPENAI_MODEL", "OpenAIChatModel")
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
        """One chat-completions request; retried on 408/409/429/5xx and connection errors.

        Raises:
            ModelError: the endpoint failed, or answered something else than a completion.
        """
        if self._client is None:
            raise RuntimeError("use the model as `async with OpenAIChatModel(...) as model:`")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(history, self.system),
        }
        if tools:
            payload["tools"] = openai_chat.tool_definitions(tools)
            payload["parallel_tool_calls"] = True
        where = f"{self.base_url}/chat/completions"
        problem = ""
        for attempt in range(RETRIES + 1):
            if attempt:
                await anyio.sleep(RETRY_BACKOFF_S * 2 ** (attempt - 1))
            try:
                response = await self._client.post("/chat/completions", json=payload)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS and attempt < RETRIES:
                log.debug("model.retry", status=response.status_code, attempt=attempt)
                continue
            if response.status_code != 200:
                raise http_error(
                    where,
                    response.status_code,
                    response.text,
                    key_variable="OPENAI_API_KEY",
                    model_variable="OPENAI_MODEL",
                )
            try:
                body = response.json()
            except ValueError as exc:
                raise ModelError(
                    f"{where} answered something that is not JSON: {response.text[:300]!r}"
                ) from exc
            return _reply(body, where)
        raise unreachable(where, problem, url_variable="OPENAI_BASE_URL")
