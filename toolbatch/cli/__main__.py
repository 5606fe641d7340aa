"""``python -m toolbatch.cli``: the same command as the ``toolbatch`` script."""

from toolbatch.cli._main import console_main

console_main()
