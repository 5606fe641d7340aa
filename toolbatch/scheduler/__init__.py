"""The scheduler: the registry, custom tools, batches, and the turn assembler."""

from toolbatch.scheduler._assembler import PostFinalizeStep, TurnAssembler
from toolbatch.scheduler._registry import Registry, default_registry
from toolbatch.scheduler._scheduler import (
    DEFAULT_CALL_TIMEOUT_CEILING_S,
    DEFAULT_CONCURRENCY,
    ApprovalCallback,
    BatchObserver,
    SchedulerConfig,
    ToolScheduler,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT_CEILING_S",
    "DEFAULT_CONCURRENCY",
    "ApprovalCallback",
    "BatchObserver",
    "PostFinalizeStep",
    "Registry",
    "SchedulerConfig",
    "ToolScheduler",
    "TurnAssembler",
    "default_registry",
]
