"""Bounding the tool output a model receives: one aggregate budget, persisted at most once.

:func:`finalize_tool_responses` is the shared finalizer the turn pipeline calls on a whole
batch (:func:`finalize_turn` with the turn's own hook text beside it, a slot kind of its
own); :func:`enforce_send_budget` is the synchronous last-chance guard at the model-send
boundary; :func:`response_text_length` measures parts the way both do. The budget unit is
Unicode code points (Python ``len``) of model-facing text; :func:`check_budget` is the one
place a public budget value is validated.
"""

from toolbatch.finalize._budget import (
    DEFAULT_BATCH_BUDGET_CHARS,
    Budget as Budget,
    budget_from_wire as budget_from_wire,
    check_budget,
    effective_budget as effective_budget,
)
from toolbatch.finalize._finalizer import (
    DEFAULT_PERSIST_CONCURRENCY as DEFAULT_PERSIST_CONCURRENCY,
    DEFAULT_PERSIST_TIMEOUT_S as DEFAULT_PERSIST_TIMEOUT_S,
    finalize_tool_responses,
    finalize_turn as finalize_turn,
)
from toolbatch.finalize._fit import TRUNCATION_HEADER as TRUNCATION_HEADER
from toolbatch.finalize._guard import enforce_send_budget
from toolbatch.finalize._hook_text import (
    FinalizedTurn as FinalizedTurn,
    HookText as HookText,
)
from toolbatch.finalize._lifecycle import (
    DEFAULT_LIFECYCLE_TOOLS,
    PLAN_MODE_REENTRY_REMINDER as PLAN_MODE_REENTRY_REMINDER,
    PLAN_MODE_REMINDER as PLAN_MODE_REMINDER,
    check_lifecycle_tools as check_lifecycle_tools,
)
from toolbatch.finalize._media import (
    DEFAULT_MEDIA_PART_BYTES as DEFAULT_MEDIA_PART_BYTES,
    decoded_size as decoded_size,
)
from toolbatch.finalize._slots import response_text_length

__all__ = [
    "DEFAULT_BATCH_BUDGET_CHARS",
    "DEFAULT_LIFECYCLE_TOOLS",
    "check_budget",
    "enforce_send_budget",
    "finalize_tool_responses",
    "response_text_length",
]
