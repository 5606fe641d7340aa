"""``serve`` and ``acp`` tune the cyclic collector while they run, and give it back."""

from __future__ import annotations

import gc

import pytest

from toolbatch.cli._runtime import SERVER_GC_THRESHOLD, _server_gc


def test_the_servers_collector_is_put_back_even_when_the_server_fails() -> None:
    """Inside, what was loaded is frozen and young collections are rarer; after, a caller
    that ran ``main`` in its own process has its collector as it was."""
    before = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(RuntimeError, match="server failed"), _server_gc():
        assert gc.get_threshold() == SERVER_GC_THRESHOLD
        assert gc.get_freeze_count() > before[1]
        raise RuntimeError("server failed")
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
