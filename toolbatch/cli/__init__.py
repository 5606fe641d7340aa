"""The ``toolbatch`` command: ``run``, ``serve``, ``acp``, ``sessions`` and ``demo``."""

from toolbatch.cli._main import main

__all__ = ["main"]
