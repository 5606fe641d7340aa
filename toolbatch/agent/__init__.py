"""Agent loops: models, the loop, and its runtimes (headless, interactive, subagent,
speculative), each completing its turns through ``ToolScheduler.complete_turn``."""

from toolbatch.agent._loop import (
    AgentLoop,
    AgentOutcome,
    HeadlessRuntime,
    InteractiveRuntime,
    Runtime,
    StopReason,
    history_from_transcript,
)
from toolbatch.agent._messages import Message, Model, ModelReply, text_of
from toolbatch.agent._openai import DEFAULT_OPENAI_BASE_URL, ModelError, OpenAIChatModel
from toolbatch.agent._scripted import ScriptedModel, ScriptStep
from toolbatch.agent._speculative import PendingRecorder, Speculation, accept, speculate
from toolbatch.agent._subagent import SubagentTool

__all__ = [
    "DEFAULT_OPENAI_BASE_URL",
    "AgentLoop",
    "AgentOutcome",
    "HeadlessRuntime",
    "InteractiveRuntime",
    "Message",
    "Model",
    "ModelError",
    "ModelReply",
    "OpenAIChatModel",
    "PendingRecorder",
    "Runtime",
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
