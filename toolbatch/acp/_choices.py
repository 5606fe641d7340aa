"""The model clients ``toolbatch acp --model`` can drive (light: the command line reads it
before it knows whether the ACP SDK is needed)."""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

__all__ = ["MODEL_CHOICES", "ModelChoice"]

ModelChoice: TypeAlias = Literal["scripted", "openai", "openai-responses", "anthropic"]
MODEL_CHOICES: Final[tuple[ModelChoice, ...]] = (
    "scripted",
    "openai",
    "openai-responses",
    "anthropic",
)
