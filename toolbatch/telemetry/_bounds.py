"""Bounds on what telemetry exports: attribute lengths, metric cardinality, hook names.

The model chooses call ids and tool names, so neither may become a megabyte attribute or
a new metric series per invented name. As the OpenTelemetry conventions recommend for
values of unbounded cardinality, a tool name that is not a tool the runtime ran (an unknown
or invalid call), or one past ``MAX_METRIC_TOOL_NAMES`` distinct names in this process, is
recorded in metrics as ``_OTHER``; spans keep the name, cut to ``MAX_ATTRIBUTE_CHARS``.

A command hook's command line may hold secrets (``Authorization: Bearer ...``), so a
command hook is named by a digest of it, never by the command itself.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Final

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "MAX_CONTENT_CHARS",
    "MAX_METRIC_TOOL_NAMES",
    "OTHER",
    "bounded",
    "hook_name",
    "metric_tool_name",
]

MAX_ATTRIBUTE_CHARS: Final = 256
"""The longest string attribute toolbatch sets from a value it did not choose."""
MAX_CONTENT_CHARS: Final = 32_768
"""The longest captured content attribute (arguments, result), when content capture is on."""
MAX_METRIC_TOOL_NAMES: Final = 1000
"""Distinct tool names metrics record per process; later new names are ``_OTHER``."""
OTHER: Final = "_OTHER"
_NOT_RUN: Final = frozenset({"unknown_tool", "invalid_call"})
_seen: set[str] = set()
_lock = threading.Lock()


def bounded(value: str, limit: int = MAX_ATTRIBUTE_CHARS) -> str:
    """``value`` cut to ``limit`` characters, ending in ``...`` when it was cut."""
    return value if len(value) <= limit else f"{value[: limit - 3]}..."


def metric_tool_name(name: str, error_type: str | None = None) -> str:
    """The tool name a metric point carries (see the module docstring)."""
    if error_type in _NOT_RUN or len(name) > MAX_ATTRIBUTE_CHARS:
        return OTHER
    if name in _seen:
        return name
    with _lock:
        if len(_seen) >= MAX_METRIC_TOOL_NAMES:
            return OTHER
        _seen.add(name)
    return name


def hook_name(name: str, kind: str) -> str:
    """What ``toolbatch.hook.name`` says: a Python hook's name, or a digest of a command."""
    if kind == "command":
        return f"command-{hashlib.sha256(name.encode('utf-8', 'replace')).hexdigest()[:12]}"
    return bounded(name)
