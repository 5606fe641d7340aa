"""Pausing the cyclic garbage collector over the finalizer's synchronous stretches."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from tests.finalize._support import response
from toolbatch.finalize import finalize_tool_responses
from toolbatch.finalize._collector import collector_paused


@pytest.fixture(autouse=True)
def _collector_enabled() -> Iterator[None]:
    """Each test starts with the collector on and leaves it on, whatever it asserts."""
    gc.enable()
    try:
        yield
    finally:
        gc.enable()


def test_the_collector_is_paused_inside_and_enabled_after() -> None:
    """Inside the block the collector is off; leaving it turns it back on."""
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    """The pause never enables a collector it did not disable."""
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_still_restores_the_collector() -> None:
    """The collector comes back on when the block raises."""
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_nested_pauses_restore_only_at_the_outermost() -> None:
    """An inner block leaving does not end the outer one's pause."""
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_pauses_in_two_threads_restore_once_both_leave() -> None:
    """The first thread in disables, the last one out enables, in whatever order they leave."""
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(10)
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread is still inside
    release.set()
    thread.join(10)
    assert gc.isenabled()


@pytest.mark.parametrize("enabled", [True, False], ids=["enabled", "disabled"])
async def test_a_finalizer_pass_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    """Cutting a batch pauses the collector only while it rebuilds, then restores it."""
    if not enabled:
        gc.disable()
    batch = [response(f"c{i}", "x" * 5_000) for i in range(20)]
    finalized = await finalize_tool_responses(batch, budget=10_000)
    assert sum(item.content_length for item in finalized) <= 10_000
    assert gc.isenabled() is enabled
