"""OTLP export for toolbatch's own programs (``toolbatch run | serve | acp | demo``).

A library never configures an SDK (the embedding program does); the command line is a
program, so it exports when the standard variables ask for it:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) set: spans and metrics go over OTLP, with the
  exporter's own variables (``..._HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``,
  ``..._CERTIFICATE``) read by the exporter;
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` (or the per-signal ``..._TRACES_PROTOCOL`` /
  ``..._METRICS_PROTOCOL``): ``http/protobuf`` (the default) or ``grpc`` (needs
  ``opentelemetry-exporter-otlp-proto-grpc``);
* ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` = ``none`` turn one signal off;
  ``OTEL_SDK_DISABLED=true`` turns both off;
* ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service (default
  ``service.name = toolbatch``); batching and intervals follow ``OTEL_BSP_*`` and
  ``OTEL_METRIC_EXPORT_*`` as the SDK reads them;
* ``TRACEPARENT`` / ``TRACESTATE`` / ``BAGGAGE`` in the program's own environment are
  extracted at start-up ([ENV-CARRIERS]), so a ``toolbatch run`` started by a traced agent
  joins that agent's trace.

The SDK and exporter are the ``toolbatch[otlp]`` extra. When they are missing, toolbatch
says so once (``telemetry.exporter_missing``, a warning on stderr) and runs without export.
On exit, what is buffered is flushed for at most ``SHUTDOWN_S``.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Self, cast

import structlog

from toolbatch.telemetry._carriers import environment_key

__all__ = ["OtlpExport", "export_from_environment"]

log = structlog.get_logger("toolbatch.telemetry")

SHUTDOWN_S: Final = 5.0
"""How long flushing spans and metrics may take when the program exits."""
DEFAULT_SERVICE_NAME: Final = "toolbatch"
DEFAULT_PROTOCOL: Final = "http/protobuf"
INSTALL_HINT: Final = "pip install 'toolbatch[otlp]'"

_warned: set[str] = set()


def _warn_once(event: str, **fields: object) -> None:
    if event in _warned:
        return
    _warned.add(event)
    log.warning(event, **fields)


def _setting(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return value
    return ""


def _wanted(env: Mapping[str, str], signal: str) -> bool:
    """Whether ``signal`` (``traces`` or ``metrics``) should be exported over OTLP."""
    upper = signal.upper()
    endpoint = _setting(env, f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return False
    exporters = {
        item.strip().lower()
        for item in (_setting(env, f"OTEL_{upper}_EXPORTER") or "otlp").split(",")
        if item.strip()
    }
    if "none" in exporters:
        return False
    if "otlp" not in exporters:
        _warn_once(
            "telemetry.exporter_unsupported",
            variable=f"OTEL_{upper}_EXPORTER",
            value=",".join(sorted(exporters)),
            message=f"toolbatch exports {signal} over OTLP only; set it to otlp or none",
        )
        return False
    return True


def _protocol(env: Mapping[str, str], signal: str) -> str:
    upper = signal.upper()
    return (
        _setting(env, f"OTEL_EXPORTER_OTLP_{upper}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
        or DEFAULT_PROTOCOL
    ).lower()


def _exporter(signal: str, protocol: str) -> Any:
    """The OTLP exporter of ``signal`` for ``protocol``, or ``None`` (said why, once)."""
    if protocol == "grpc":
        module = f"opentelemetry.exporter.otlp.proto.grpc.{signal[:-1]}_exporter"
        package = "opentelemetry-exporter-otlp-proto-grpc"
    elif protocol == "http/protobuf":
        module = f"opentelemetry.exporter.otlp.proto.http.{signal[:-1]}_exporter"
        package = "opentelemetry-exporter-otlp-proto-http"
    else:
        _warn_once(
            "telemetry.protocol_unsupported",
            protocol=protocol,
            message="OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc; not exporting",
        )
        return None
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        hint = INSTALL_HINT if protocol == "http/protobuf" else f"pip install {package}"
        _warn_once(
            "telemetry.exporter_missing",
            message=(
                f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OTLP exporter for {protocol} is "
                f"not installed ({exc.name}); install it with: {hint}. Running without "
                f"exporting telemetry."
            ),
        )
        return None
    return imported.OTLPSpanExporter() if signal == "traces" else imported.OTLPMetricExporter()


class _EnvironmentGetter:
    """A ``Getter`` on this process's environment, reading normalised keys only."""

    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(environment_key(key))
        return None if value is None else [value]

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return [key for key in carrier if key == environment_key(key)]


class OtlpExport:
    """What :func:`export_from_environment` set up; ``close()`` (or leave the ``with``)
    flushes and stops it.

    Attributes:
        traces: spans are exported.
        metrics: metrics are exported.
    """

    def __init__(self) -> None:
        self.traces = False
        self.metrics = False
        self._span_processor: Any = None
        self._meter_provider: Any = None
        self._context_token: Any = None
        self._context: Any = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Flush what is buffered and stop exporting, within ``SHUTDOWN_S`` in all.

        The SDK's shutdowns wait for their exporter, which retries an unreachable
        collector for up to its own timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s): they
        run in daemon threads, and what has not been sent by the deadline is dropped.
        """
        if self._context_token is not None:
            self._context.detach(self._context_token)
            self._context_token = None
        stops: list[tuple[str, Callable[[], object]]] = []
        processor, self._span_processor = self._span_processor, None
        if processor is not None:
            stops.append(("traces", processor.shutdown))
        provider, self._meter_provider = self._meter_provider, None
        if provider is not None:
            stops.append(("metrics", provider.shutdown))
        threads = [
            threading.Thread(target=_stop, args=(signal, stop), daemon=True)
            for signal, stop in stops
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + SHUTDOWN_S
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            log.warning("telemetry.flush_timed_out", seconds=SHUTDOWN_S)


def _stop(signal: str, stop: Callable[[], object]) -> None:
    try:
        stop()
    except Exception as exc:  # an exporter never breaks the program's exit
        log.warning("telemetry.flush_failed", signal=signal, error=repr(exc))


def export_from_environment(
    *, service_name: str = DEFAULT_SERVICE_NAME, environ: Mapping[str, str] | None = None
) -> OtlpExport:
    """Export spans and metrics over OTLP as the standard ``OTEL_*`` variables say.

    Sets the global tracer and meter providers (unless a program already set them), and
    makes the context in ``TRACEPARENT`` / ``TRACESTATE`` current. Meant for entry points;
    nothing happens when no OTLP endpoint is configured.

    Args:
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` or
            ``OTEL_RESOURCE_ATTRIBUTES`` name one.
        environ: the variables to read (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    export = OtlpExport()
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return export
    wanted = [signal for signal in ("traces", "metrics") if _wanted(env, signal)]
    if not wanted:
        return export
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError as exc:
        _warn_once(
            "telemetry.exporter_missing",
            message=(
                f"OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK is not "
                f"installed ({exc.name}); install it with: {INSTALL_HINT}. Running without "
                f"exporting telemetry."
            ),
        )
        return export
    from opentelemetry import context, metrics, propagate, trace

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service_name}))
    if "traces" in wanted:
        _start_traces(export, resource, _protocol(env, "traces"), trace)
    if "metrics" in wanted:
        _start_metrics(export, resource, _protocol(env, "metrics"), metrics)
    if export.traces or export.metrics:
        extracted = propagate.extract(env, getter=cast(Any, _EnvironmentGetter()))
        export._context = context
        export._context_token = context.attach(extracted)
        log.info("telemetry.exporting", traces=export.traces, metrics=export.metrics)
    return export


def _start_traces(export: OtlpExport, resource: Any, protocol: str, trace: Any) -> None:
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("telemetry.tracer_provider_kept")  # the program configured its own
        return
    exporter = _exporter("traces", protocol)
    if exporter is None:
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    export._span_processor = processor
    export.traces = True


def _start_metrics(export: OtlpExport, resource: Any, protocol: str, metrics: Any) -> None:
    if type(metrics.get_meter_provider()).__name__ != "_ProxyMeterProvider":
        log.info("telemetry.meter_provider_kept")
        return
    exporter = _exporter("metrics", protocol)
    if exporter is None:
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    provider = MeterProvider(
        resource=resource,
        metric_readers=[PeriodicExportingMetricReader(exporter)],
        shutdown_on_exit=False,
    )
    metrics.set_meter_provider(provider)
    export._meter_provider = provider
    export.metrics = True
