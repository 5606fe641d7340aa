"""Lifecycle tools: tool output that is policy input, kept inline outside the budget.

The successful output of ``enter_plan_mode`` installs the planning policy; cutting it would
change the rules the agent runs under, not shorten diagnostics. The exemption is keyed on
the tool: a successful response of a tool whose name is in the configured lifecycle set
keeps its output inline whatever its text; its failures, and every other tool's output,
stay budgeted. ``PLAN_MODE_REMINDER`` and ``PLAN_MODE_REENTRY_REMINDER`` are the texts an
``enter_plan_mode`` tool typically returns (for tools that implement it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from toolbatch.errors import ConfigError

__all__ = [
    "DEFAULT_LIFECYCLE_TOOLS",
    "PLAN_MODE_REENTRY_REMINDER",
    "PLAN_MODE_REMINDER",
    "check_lifecycle_tools",
]

DEFAULT_LIFECYCLE_TOOLS: Final[frozenset[str]] = frozenset({"enter_plan_mode"})
"""Tools whose successful output is policy input, never cut (pass your own set to change)."""

PLAN_MODE_REMINDER: Final = (
    "<system-reminder>\n"
    "Plan mode is active. You must not edit files, run commands that change anything, or "
    "otherwise modify the system; only read, search and think. Investigate the task, then "
    "present a complete, step-by-step plan by calling exit_plan_mode and wait for the "
    "user's approval before making any change.\n"
    "</system-reminder>"
)
"""What an ``enter_plan_mode`` tool returns when it switches plan mode on."""

PLAN_MODE_REENTRY_REMINDER: Final = (
    "<system-reminder>\n"
    "Plan mode is active again. The plan you presented earlier was not approved or needs "
    "revision. You must not edit files, run commands that change anything, or otherwise "
    "modify the system; only read, search and think. Revise the plan and present it by "
    "calling exit_plan_mode, then wait for the user's approval before making any change.\n"
    "</system-reminder>"
)
"""What it returns when plan mode is entered again after a rejected plan."""


_last_accepted: frozenset[str] | None = None
"""The frozen set :func:`check_lifecycle_tools` accepted last (each turn passes the same)."""


def check_lifecycle_tools(tools: Iterable[str], *, name: str = "lifecycle_tools") -> frozenset[str]:
    """The lifecycle tool names as a frozen set.

    Raises:
        ConfigError: a bare string (a common slip for a one-name set) or a non-string name.
    """
    global _last_accepted
    last = _last_accepted  # read once: another thread may set it meanwhile
    if tools is last and last is not None:
        return last  # each turn passes the same set: checked once (hot path)
    if isinstance(tools, str | bytes):
        raise ConfigError(
            f"{name} must be a collection of tool names, got the string {tools!r}; wrap it: "
            f"{{{tools!r}}}"
        )
    try:
        names = frozenset(tools)
    except TypeError:
        raise ConfigError(
            f"{name} must be a collection of tool names, got {tools!r}; pass e.g. "
            f'{{"enter_plan_mode"}}'
        ) from None
    for tool in names:
        if not isinstance(tool, str) or not tool:
            raise ConfigError(f"{name} must hold non-empty tool names, got {tool!r}")
    if names is tools:
        _last_accepted = names  # immutable: checking it again would find the same
    return names
