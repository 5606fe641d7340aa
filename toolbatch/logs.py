"""Logging set-up for programs that embed toolbatch (entry points, examples, the CLI).

The library itself only calls ``structlog.get_logger``; it never configures structlog,
because unconfigured structlog prints to stdout and would corrupt JSON written there. A
program calls ``configure_logging`` once, at start-up, to send toolbatch's events to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO, TypeAlias

import structlog

from toolbatch.errors import ConfigError

__all__ = [
    "configure_logging",
]

LogLevel: TypeAlias = Literal["debug", "info", "warning", "error"]


def configure_logging(
    level: LogLevel = "warning", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Send structlog events at ``level`` and above to ``stream`` (default stderr).

    Args:
        level: the least severe level shown.
        json: one JSON object per line instead of human-readable lines.
        stream: where the lines go (default ``sys.stderr``).
    """
    if level not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"level must be debug, info, warning or error, got {level!r}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(
            colors=False,
            # The same lines whether or not rich happens to be installed.
            exception_formatter=structlog.dev.plain_traceback,
        )
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream if stream is not None else sys.stderr),
        cache_logger_on_first_use=False,
    )
