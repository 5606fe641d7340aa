"""A real OpenTelemetry SDK for each test: an in-memory span exporter and metric reader.

toolbatch's telemetry is pointed at these providers with ``toolbatch.telemetry.configure``
(never the global ones), so no other test of the run records anything.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.telemetry._support import Recorded
from toolbatch import telemetry


@pytest.fixture
def otel() -> Iterator[Recorded]:
    """toolbatch's spans and metrics, recorded in memory for this test."""
    recorded = Recorded()
    telemetry.configure(
        tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider
    )
    try:
        yield recorded
    finally:
        telemetry.configure()
        recorded.shutdown()
