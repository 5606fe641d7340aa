"""An OpenAI Responses model client on the official ``openai`` SDK (``toolbatch[openai]``).

Configured from the variables the SDK reads (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``) and ``OPENAI_MODEL``, or passed explicitly. Each
request carries the whole history (``store`` is off: nothing is kept at OpenAI between
turns): user text as ``user`` messages; the model's text as an ``assistant`` message and
its calls as ``function_call`` items; a tool message as one ``function_call_output`` per
function response, images inside it, then a ``user`` message with the batch's text, through
``toolbatch.providers.openai_responses``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
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
from toolbatch.providers import openai_responses

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIResponsesModel", "responses_input"]

log = structlog.get_logger("toolbatch.agent.openai_responses")

_CLIENT: Final = "OpenAIResponsesModel"


def responses_input(
    history: Sequence[Message], *, sent_arguments: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The Responses ``input`` items for ``history``.

    ``sent_arguments`` maps a call id to the ``arguments`` string the model sent for it:
    a call goes back exactly as the model made it (a malformed one included, which
    ``args`` holds as ``{}``); calls not in it are written from their ``args``.
    """
    sent = sent_arguments or {}
    items: list[dict[str, Any]] = []
    earlier: list[Sequence[Part]] = []
    for message in history:
        text = text_of(message.parts)
        if message.role == "user":
            items.append({"type": "message", "role": "user", "content": text})
        elif message.role == "model":
            if text:
                items.append({"type": "message", "role": "assistant", "content": text})
            items.extend(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": sent.get(call.id) or json.dumps(call.args, ensure_ascii=False),
                }
                for call in message.tool_calls
            )
        else:
            items.extend(openai_responses.tool_results(message.parts, earlier=earlier))
            earlier.append(message.parts)
    return items


class OpenAIResponsesModel:
    """A Responses API client; an async context manager owning the SDK client.

    Args:
        model: the model name (default ``$OPENAI_MODEL``).
        base_url: the API base (default ``$OPENAI_BASE_URL``, else OpenAI's).
        api_key: the key (default ``$OPENAI_API_KEY``; any value for a local server).
        system: optional instructions.
        timeout_s: seconds per request (the SDK's default: replies are not streamed).

    Raises:
        ConfigError: no model name or key, or the ``openai`` SDK is not installed.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        system: str | None = None,
        timeout_s: float = SDK_REQUEST_TIMEOUT_S,
    ) -> None:
        # The name first: a missing one is refused before seconds of SDK import.
        self.model = model_name(model, "OPENAI_MODEL", _CLIENT)
        self._sdk = import_sdk("openai", _CLIENT)
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        if not self.api_key:
            raise ConfigError(
                f"no API key: set OPENAI_API_KEY (any value for a local server) "
                f"or pass {_CLIENT}(api_key=...)"
            )
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OPENAI_BASE_URL must be an http(s) URL, got {self.base_url!r}")
        self.system = system
        self._timeout_s = timeout_s
        self._client: AsyncOpenAI | None = None
        self._sent_arguments: dict[str, str] = {}
        """Each call's ``arguments`` as the model sent them, by call id."""

    async def __aenter__(self) -> Self:
        self._client = self._sdk.AsyncOpenAI(
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
        """One ``responses.create`` request (the SDK retries 408/409/429/5xx).

        Raises:
            ModelError: the API failed, or answered something else than a response.
        """
        if self._client is None:
            raise RuntimeError(f"use the model as `async with {_CLIENT}(...) as model:`")
        sdk = self._sdk
        where = str(self._client.base_url).rstrip("/") + "/responses"
        options: dict[str, Any] = {}
        if self.system:
            options["instructions"] = self.system
        if tools:
            options["tools"] = openai_responses.tool_definitions(tools)
            options["parallel_tool_calls"] = True
        try:
            response = await self._client.responses.create(
                model=self.model,
                input=cast(Any, responses_input(history, sent_arguments=self._sent_arguments)),
                store=False,
                **options,
            )
        except sdk.APIStatusError as exc:
            raise http_error(
                where,
                exc.status_code,
                exc.message,
                key_variable="OPENAI_API_KEY",
                model_variable="OPENAI_MODEL",
            ) from exc
        except sdk.APIConnectionError as exc:
            raise unreachable(where, str(exc), url_variable="OPENAI_BASE_URL") from exc
        except sdk.OpenAIError as exc:
            raise ModelError(f"{where}: {exc}") from exc
        if response.status == "failed":
            problem = response.error.message if response.error is not None else "no reason given"
            raise ModelError(f"{where} answered a failed response: {problem}")
        try:
            calls = openai_responses.tool_calls(response)
        except ValueError as exc:
            raise ModelError(f"{where} did not answer a response: {exc}") from exc
        for item in response.output:
            if item.type == "function_call" and isinstance(item.arguments, str):
                self._sent_arguments[item.call_id] = item.arguments
        log.debug("model.reply", calls=len(calls), status=response.status)
        return ModelReply(text=response.output_text, tool_calls=calls)
