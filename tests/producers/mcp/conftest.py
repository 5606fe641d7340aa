"""A blocking portal per test module: the event loop that real MCP servers are run on."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread, shared by the module's servers and calls."""
    with start_blocking_portal() as blocking_portal:
        yield blocking_portal
