"""What ``toolbatch acp``'s options offer: the model clients of ``--model`` and the default
of ``--max-sessions`` (light: the command line reads them before it knows whether the ACP
SDK is needed)."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

__all__ = ["DEFAULT_MAX_SESSIONS", "MODEL_CHOICES", "ModelChoice"]

ModelChoice: TypeAlias = Literal["scripted", "openai", "openai-responses", "anthropic"]
MODEL_CHOICES: Final[tuple[ModelChoice, ...]] = (
    "scripted",
    "openai",
    "openai-responses",
    "anthropic",
)

DEFAULT_MAX_SESSIONS: Final = 32
"""Sessions held open at once (each has its scheduler, and with it threads and MCP servers):
4,000 ``session/new`` once made 4,001 threads."""
