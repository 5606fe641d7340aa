"""Lifecycle reminders: tool output that is policy input, kept inline outside the budget.

The successful output of ``enter_plan_mode`` installs the planning policy; cutting it would
change the rules the agent runs under, not shorten diagnostics. A registry maps protected
tool names to their known reminder texts. Only an output that equals a registered reminder,
or starts with one followed by a blank line, is protected, and only that reminder (with
its blank line); whatever follows, arbitrary output and every error text stay budgeted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from toolbatch.errors import ConfigError

__all__ = [
    "DEFAULT_LIFECYCLE_REMINDERS",
    "PLAN_MODE_REENTRY_REMINDER",
    "PLAN_MODE_REMINDER",
    "protected_prefix_length",
    "validate_reminders",
]

REMINDER_SEPARATOR: Final = "\n\n"

PLAN_MODE_REMINDER: Final = (
    "<system-reminder>\n"
    "Plan mode is active. You must not edit files, run commands that change anything, or "
    "otherwise modify the system; only read, search and think. Investigate the task, then "
    "present a complete, step-by-step plan by calling exit_plan_mode and wait for the "
    "user's approval before making any change.\n"
    "</system-reminder>"
)
"""What ``enter_plan_mode`` returns when it switches plan mode on."""

PLAN_MODE_REENTRY_REMINDER: Final = (
    "<system-reminder>\n"
    "Plan mode is active again. The plan you presented earlier was not approved or needs "
    "revision. You must not edit files, run commands that change anything, or otherwise "
    "modify the system; only read, search and think. Revise the plan and present it by "
    "calling exit_plan_mode, then wait for the user's approval before making any change.\n"
    "</system-reminder>"
)
"""What ``enter_plan_mode`` returns when plan mode is entered again after a rejected plan."""

DEFAULT_LIFECYCLE_REMINDERS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {"enter_plan_mode": (PLAN_MODE_REMINDER, PLAN_MODE_REENTRY_REMINDER)}
)
"""Protected tool names and their reminder texts (pass your own mapping to change them)."""


def validate_reminders(
    reminders: Mapping[str, Sequence[str]],
) -> dict[str, tuple[str, ...]]:
    """The reminders checked and ordered longest first (so the longest match wins).

    Raises:
        ConfigError: a reminder list is a bare string (a common slip for a 1-tuple), or a
            reminder is not a non-empty string.
    """
    checked: dict[str, tuple[str, ...]] = {}
    for name, texts in reminders.items():
        if isinstance(texts, str):
            raise ConfigError(
                f"lifecycle reminders for {name!r} must be a sequence of strings, got the "
                f"string {texts[:40]!r}...; wrap it: {{{name!r}: (text,)}}"
            )
        for text in texts:
            if not isinstance(text, str) or not text:
                raise ConfigError(
                    f"a lifecycle reminder for {name!r} must be a non-empty string, "
                    f"got {text!r}; remove it or give its text"
                )
        checked[name] = tuple(sorted(texts, key=len, reverse=True))
    return checked


def protected_prefix_length(
    tool_name: str, output: str, reminders: Mapping[str, tuple[str, ...]]
) -> int:
    """How many leading code points of ``tool_name``'s successful ``output`` are protected.

    ``reminders`` must come from :func:`validate_reminders` (longest first).
    """
    for reminder in reminders.get(tool_name, ()):
        if output.startswith(reminder):
            if len(output) == len(reminder):
                return len(output)
            if output.startswith(REMINDER_SEPARATOR, len(reminder)):
                return len(reminder) + len(REMINDER_SEPARATOR)
    return 0
