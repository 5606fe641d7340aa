"""Agent loops: models, the loop, and its runtimes (headless, interactive, subagent,
speculative), each completing its turns through ``ToolScheduler.complete_turn``.

Model clients: ``OpenAIChatModel`` (any OpenAI-compatible chat endpoint, no extra needed),
``OpenAIResponsesModel`` (``toolbatch[openai]``) and ``AnthropicModel``
(``toolbatch[anthropic]``), each mapping turns through ``toolbatch.providers``."""

from toolbatch.agent._anthropic import (
    DEFAULT_ANTHROPIC_MAX_TOKENS as DEFAULT_ANTHROPIC_MAX_TOKENS,
    AnthropicModel,
)
from toolbatch.agent._loop import (
    AgentLoop,
    AgentOutcome as AgentOutcome,
    HeadlessRuntime,
    InteractiveRuntime,
    Runtime as Runtime,
    SchedulerLike,
    StopReason as StopReason,
    history_from_transcript,
)
from toolbatch.agent._messages import Message, Model, ModelReply as ModelReply, text_of as text_of
from toolbatch.agent._openai import (
    DEFAULT_OPENAI_BASE_URL as DEFAULT_OPENAI_BASE_URL,
    OpenAIChatModel,
)
from toolbatch.agent._openai_responses import OpenAIResponsesModel
from toolbatch.agent._scripted import ScriptedModel, ScriptStep
from toolbatch.agent._speculative import (
    PendingRecorder,
    Speculation as Speculation,
    accept,
    speculate,
)
from toolbatch.agent._subagent import SubagentTool
from toolbatch.errors import ModelError

__all__ = [
    "AgentLoop",
    "AnthropicModel",
    "HeadlessRuntime",
    "InteractiveRuntime",
    "Message",
    "Model",
    "ModelError",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "PendingRecorder",
    "SchedulerLike",
    "ScriptStep",
    "ScriptedModel",
    "SubagentTool",
    "accept",
    "history_from_transcript",
    "speculate",
]
