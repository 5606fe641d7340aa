"""The scheduler: the registry, custom tools, and the one turn pipeline (execute, complete)."""

from toolbatch._core import BatchObserver as BatchObserver
from toolbatch.scheduler._config import (
    DEFAULT_CALL_TIMEOUT_CEILING_S as DEFAULT_CALL_TIMEOUT_CEILING_S,
    DEFAULT_CONCURRENCY as DEFAULT_CONCURRENCY,
    USE_CONFIG,
    SchedulerConfig,
    UseConfig as UseConfig,
)
from toolbatch.scheduler._gate import (
    ApprovalCallback,
    approval_reason as approval_reason,
    ask_approval as ask_approval,
)
from toolbatch.scheduler._pending import PendingTurn
from toolbatch.scheduler._registry import Registry, default_registry
from toolbatch.scheduler._scheduler import ToolScheduler

__all__ = [
    "USE_CONFIG",
    "ApprovalCallback",
    "PendingTurn",
    "Registry",
    "SchedulerConfig",
    "ToolScheduler",
    "default_registry",
]
