"""The ``toolbatch`` command: ``run``, ``serve``, ``acp``, ``sessions`` and ``demo``."""

import sys


def _import_structlog_without_rich() -> None:
    """Import structlog as if rich were not installed, when nothing has imported either.

    structlog imports rich (and with it attrs and pygments) whenever it is installed, for
    exception renderers the command never uses (``configure_logging`` renders plain
    tracebacks): 40-55 ms of every start of the command, about a sixth of ``toolbatch run``'s
    cold start. rich stays importable: only structlog's own optional use of it is skipped.
    """
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()

from toolbatch.cli._main import console_main as console_main, main  # noqa: E402

__all__ = ["main"]
