"""An Anthropic Messages model client on the official ``anthropic`` SDK (``toolbatch[anthropic]``).

Configured from the variables the SDK reads (``ANTHROPIC_API_KEY`` or
``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``) and ``ANTHROPIC_MODEL``, or passed
explicitly. History maps to messages through ``toolbatch.providers.anthropic``: user text
as ``user`` text blocks; the model's text and ``tool_use`` blocks as ``assistant``; a tool
message as one ``user`` message whose ``tool_result`` blocks (one per function response,
images inside, ``is_error`` on errors) come first, then the batch's text. Consecutive
messages of one role are merged, as the API would.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, cast

import structlog

from toolbatch._core import Part, ToolDeclaration
from toolbatch.agent._clients import (
    RETRIES,
    SDK_REQUEST_TIMEOUT_S,
    http_error,
    import_sdk,
    model_name,
    unreachable,
)
from toolbatch.agent._messages import Message, ModelReply, text_of
from toolbatch.errors import ConfigError, ModelError
from toolbatch.providers import anthropic as anthropic_api

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_ANTHROPIC_MAX_TOKENS", "AnthropicModel", "anthropic_messages"]

log = structlog.get_logger("toolbatch.agent.anthropic")

DEFAULT_ANTHROPIC_MAX_TOKENS: Final = 8192
"""Output tokens per reply: room for code and many parallel calls; every Claude model
since 3.5 allows at least this many (pass ``max_tokens=4096`` for Claude 3)."""
_CLIENT: Final = "AnthropicModel"


def anthropic_messages(history: Sequence[Message]) -> list[dict[str, Any]]:
    """The Messages ``messages`` for ``history``."""
    messages: list[dict[str, Any]] = []
    earlier: list[Sequence[Part]] = []

    def add(role: str, content: list[dict[str, Any]]) -> None:
        if not content:
            return  # the API refuses empty messages
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": role, "content": content})

    for message in history:
        text = text_of(message.parts)
        if message.role == "user":
            add("user", [{"type": "text", "text": text}] if text else [])
        elif message.role == "model":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            blocks += [
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
                for call in message.tool_calls
            ]
            add("assistant", blocks)
        else:
            for result in anthropic_api.tool_results(message.parts, earlier=earlier):
                add("user", result["content"])
            earlier.append(message.parts)
    return messages


class AnthropicModel:
    """A Messages API client; an async context manager owning the SDK client.

    Args:
        model: the model name (default ``$ANTHROPIC_MODEL``).
        base_url: the API base (default ``$ANTHROPIC_BASE_URL``, else Anthropic's).
        api_key: the key (default: what the SDK finds, ``$ANTHROPIC_API_KEY`` first).
        system: an optional system prompt.
        max_tokens: the most output tokens per reply (the API requires a number).
        timeout_s: seconds per request (the SDK's default: replies are not streamed).

    Raises:
        ConfigError: no model name, a bad ``max_tokens``, or the SDK is not installed.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        system: str | None = None,
        max_tokens: int = DEFAULT_ANTHROPIC_MAX_TOKENS,
        timeout_s: float = SDK_REQUEST_TIMEOUT_S,
    ) -> None:
        # The name first: a missing one is refused before seconds of SDK import.
        self.model = model_name(model, "ANTHROPIC_MODEL", _CLIENT)
        self._sdk = import_sdk("anthropic", _CLIENT)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url
        self.api_key = api_key
        self.system = system
        self.max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._client: AsyncAnthropic | None = None

    async def __aenter__(self) -> Self:
        self._client = self._sdk.AsyncAnthropic(
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=self._timeout_s,
            max_retries=RETRIES,
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
            await client.close()

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        """One ``messages.create`` request (the SDK retries 408/409/429/5xx).

        Raises:
            ModelError: the API failed, or answered something else than a message.
        """
        if self._client is None:
            raise RuntimeError(f"use the model as `async with {_CLIENT}(...) as model:`")
        sdk = self._sdk
        where = str(self._client.base_url).rstrip("/") + "/v1/messages"
        options: dict[str, Any] = {}
        if self.system:
            options["system"] = self.system
        if tools:
            options["tools"] = anthropic_api.tool_definitions(tools)
        try:
            message = await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=cast(Any, anthropic_messages(history)),
                **options,
            )
        except sdk.APIStatusError as exc:
            raise http_error(
                where,
                exc.status_code,
                exc.message,
                key_variable="ANTHROPIC_API_KEY",
                model_variable="ANTHROPIC_MODEL",
            ) from exc
        except sdk.APIConnectionError as exc:
            raise unreachable(where, str(exc), url_variable="ANTHROPIC_BASE_URL") from exc
        except sdk.AnthropicError as exc:
            raise ModelError(f"{where}: {exc}; set ANTHROPIC_API_KEY if no key was found") from exc
        try:
            calls = anthropic_api.tool_calls(message)
        except ValueError as exc:
            raise ModelError(f"{where} did not answer a message: {exc}") from exc
        text = "".join(
            block.text for block in message.content if getattr(block, "type", "") == "text"
        )
        log.debug("model.reply", calls=len(calls), stop_reason=message.stop_reason)
        return ModelReply(text=text, tool_calls=calls)
