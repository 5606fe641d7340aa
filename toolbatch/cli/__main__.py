"""``python -m toolbatch.cli``: the same command as the ``toolbatch`` script."""

import sys

from toolbatch.cli._main import main

sys.exit(main())
