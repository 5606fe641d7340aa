"""The scheduler: the registry, custom tools, and the one turn pipeline (execute, complete)."""

from toolbatch.scheduler._gate import approval_reason
from toolbatch.scheduler._pending import PendingTurn
from toolbatch.scheduler._registry import Registry, default_registry
from toolbatch.scheduler._scheduler import (
    DEFAULT_CALL_TIMEOUT_CEILING_S,
    DEFAULT_CONCURRENCY,
    USE_CONFIG,
    ApprovalCallback,
    BatchObserver,
    SchedulerConfig,
    ToolScheduler,
    UseConfig,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT_CEILING_S",
    "DEFAULT_CONCURRENCY",
    "USE_CONFIG",
    "ApprovalCallback",
    "BatchObserver",
    "PendingTurn",
    "Registry",
    "SchedulerConfig",
    "ToolScheduler",
    "UseConfig",
    "approval_reason",
    "default_registry",
]
