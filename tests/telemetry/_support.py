"""Reading what toolbatch recorded: span trees by id, metric points by name."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-0[0-9a-f]")


def hex_id(value: int, width: int = 16) -> str:
    return f"{value:0{width}x}"


@dataclass
class Point:
    """One metric data point: its attributes and its value (a sum, or a histogram's)."""

    attributes: dict[str, Any]
    value: float
    count: int


class Recorded:
    """An SDK tracer and meter provider whose output stays in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        names = [span.name for span in self.spans()]
        assert len(found) == 1, f"{len(found)} spans named {name!r} among {names}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        return [
            span
            for span in self.spans()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]

    def call_spans(self) -> dict[str, ReadableSpan]:
        """The execute_tool spans by call id."""
        return {
            str(span.attributes["gen_ai.tool.call.id"]): span
            for span in self.spans()
            if span.name.startswith("execute_tool ")
        }

    def points(self, metric: str) -> list[Point]:
        data = self.reader.get_metrics_data()
        found: list[Point] = []
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name != metric:
                        continue
                    for point in item.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.sum
                        found.append(
                            Point(dict(point.attributes), value, getattr(point, "count", 1))
                        )
        return found

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attributes(span: ReadableSpan) -> Mapping[str, Any]:
    return dict(span.attributes or {})


def point_for(points: Sequence[Point], **match: Any) -> Point:
    """The one point whose attributes include ``match`` (dots written as ``__``)."""
    wanted = {key.replace("__", "."): value for key, value in match.items()}
    found = [p for p in points if all(p.attributes.get(k) == v for k, v in wanted.items())]
    assert len(found) == 1, f"{len(found)} points match {wanted}: {[p.attributes for p in points]}"
    return found[0]
