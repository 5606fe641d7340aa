"""Bounding the tool output a model receives: one aggregate budget, persisted at most once.

:func:`finalize_tool_responses` is the shared finalizer every runtime boundary calls on a
whole batch; :func:`enforce_send_budget` is the synchronous last-chance guard at the
model-send boundary; :func:`response_text_length` measures parts the way both do. The
budget unit is Unicode code points (Python ``len``) of model-facing text.
"""

from toolbatch.finalize._budget import DEFAULT_BATCH_BUDGET_CHARS
from toolbatch.finalize._finalizer import DEFAULT_PERSIST_CONCURRENCY, finalize_tool_responses
from toolbatch.finalize._fit import TRUNCATION_HEADER
from toolbatch.finalize._guard import enforce_send_budget
from toolbatch.finalize._lifecycle import (
    DEFAULT_LIFECYCLE_REMINDERS,
    PLAN_MODE_REENTRY_REMINDER,
    PLAN_MODE_REMINDER,
)
from toolbatch.finalize._slots import response_text_length

__all__ = [
    "DEFAULT_BATCH_BUDGET_CHARS",
    "DEFAULT_LIFECYCLE_REMINDERS",
    "DEFAULT_PERSIST_CONCURRENCY",
    "PLAN_MODE_REENTRY_REMINDER",
    "PLAN_MODE_REMINDER",
    "TRUNCATION_HEADER",
    "enforce_send_budget",
    "finalize_tool_responses",
    "response_text_length",
]
