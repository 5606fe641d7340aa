"""Agent loops: models, the loop, and its runtimes (headless, interactive, subagent,
speculative), each completing its turns through ``ToolScheduler.complete_turn``.

Model clients: ``OpenAIChatModel`` (any OpenAI-compatible chat endpoint, no extra needed),
``OpenAIResponsesModel`` (``toolbatch[openai]``) and ``AnthropicModel``
(``toolbatch[anthropic]``), each mapping turns through ``toolbatch.providers``."""

from toolbatch.agent._anthropic import DEFAULT_ANTHROPIC_MAX_TOKENS, AnthropicModel
from toolbatch.agent._loop import (
    AgentLoop,
    AgentOutcome,
    HeadlessRuntime,
    InteractiveRuntime,
    Runtime,
    SchedulerLike,
    StopReason,
    history_from_transcript,
)
from toolbatch.agent._messages import Message, Model, ModelReply, text_of
from toolbatch.agent._openai import DEFAULT_OPENAI_BASE_URL, OpenAIChatModel
from toolbatch.agent._openai_responses import OpenAIResponsesModel
from toolbatch.agent._scripted import ScriptedModel, ScriptStep
from toolbatch.agent._speculative import PendingRecorder, Speculation, accept, speculate
from toolbatch.agent._subagent import SubagentTool
from toolbatch.errors import ModelError

__all__ = [
    "DEFAULT_ANTHROPIC_MAX_TOKENS",
    "DEFAULT_OPENAI_BASE_URL",
    "AgentLoop",
    "AgentOutcome",
    "AnthropicModel",
    "HeadlessRuntime",
    "InteractiveRuntime",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "PendingRecorder",
    "Runtime",
    "SchedulerLike",
    "ScriptStep",
    "ScriptedModel",
    "Speculation",
    "StopReason",
    "SubagentTool",
    "accept",
    "history_from_transcript",
    "speculate",
    "text_of",
]
