"""Whether telemetry is on, and the OpenTelemetry objects it uses when it is.

Everything here is cheap when telemetry is off. OpenTelemetry is imported lazily, and only
once something in the process already uses it: an SDK can only be configured by code that
imported ``opentelemetry.trace`` or ``opentelemetry.metrics`` first (or by the
``OTEL_PYTHON_TRACER_PROVIDER`` / ``OTEL_PYTHON_METER_PROVIDER`` variables the API reads
itself), so a process that never did has no SDK and toolbatch does not pay the import.
With the API installed but no SDK set, the global providers are the API's proxies and
toolbatch records nothing either; a valid span that is current (a context someone
extracted) is still propagated to child processes, as the API's no-op tracer would.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, ParamSpec, TypeVar

import structlog

from toolbatch.errors import ConfigError
from toolbatch.telemetry._names import (
    CAPTURE_CONTENT_ENV,
    CAPTURE_CONTENT_ON,
    HOOK_DURATION_BUCKETS_S,
    MCP_DURATION_BUCKETS_S,
    METRIC_ARTIFACT_BYTES,
    METRIC_ARTIFACT_FAILURES,
    METRIC_ARTIFACTS,
    METRIC_HOOK_DURATION,
    METRIC_MCP_DURATION,
    METRIC_OUTPUT_PRODUCED,
    METRIC_OUTPUT_SENT,
    METRIC_TOOL_DURATION,
    TOOL_DURATION_BUCKETS_S,
)

__all__ = [
    "SETTINGS",
    "Instruments",
    "Otel",
    "bound",
    "configure",
    "never_raises",
    "propagating",
    "recording",
]

log = structlog.get_logger("toolbatch.telemetry")

INSTRUMENTATION_NAME: Final = "toolbatch"


@functools.cache
def _version() -> str:
    """toolbatch's version, read once a tracer or meter is made (reading the installed
    metadata costs a few milliseconds of every start, telemetry on or off)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("toolbatch")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return "0"


_PROVIDER_VARIABLES: Final = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
_NO_SDK_METER_PROVIDERS: Final = frozenset({"_ProxyMeterProvider", "NoOpMeterProvider"})
_UNKNOWN: Final = object()


@dataclass(slots=True)
class _Settings:
    enabled: bool = True
    tracer_provider: Any = None
    meter_provider: Any = None
    capture_content: bool | None = None


SETTINGS: Final = _Settings()


def configure(
    *,
    enabled: bool = True,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool | None = None,
) -> None:
    """Set how toolbatch emits telemetry; every call sets all four (omitted: the default).

    Args:
        enabled: ``False`` turns everything off: no spans, no metrics, no trace context for
            child processes, whatever SDK is configured.
        tracer_provider: the ``TracerProvider`` toolbatch's spans go to (default: the global
            one, ``opentelemetry.trace.get_tracer_provider()``).
        meter_provider: the ``MeterProvider`` its metrics go to (default: the global one).
        capture_content: put tool arguments and results on the spans
            (``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``). ``None`` (the
            default) reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``: ``true``,
            ``SPAN_ONLY`` or ``SPAN_AND_EVENT`` turn it on; anything else leaves it off.
    """
    for option, value in (("enabled", enabled), ("capture_content", capture_content)):
        if not isinstance(value, bool) and not (option == "capture_content" and value is None):
            raise ConfigError(f"{option} must be True or False, got {value!r}")
    SETTINGS.enabled = enabled
    SETTINGS.tracer_provider = tracer_provider
    SETTINGS.meter_provider = meter_provider
    SETTINGS.capture_content = capture_content
    _BINDING.env_provider = None  # read the provider variables again
    if _BINDING.otel is not None:
        _BINDING.otel.tracers.clear()
        _BINDING.otel.instruments.clear()


def capture_content() -> bool:
    """Whether tool arguments and results go on spans (see :func:`configure`)."""
    if SETTINGS.capture_content is not None:
        return SETTINGS.capture_content
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in CAPTURE_CONTENT_ON


class Instruments:
    """toolbatch's metric instruments on one meter (see ``_names`` for what each counts)."""

    __slots__ = (
        "artifact_bytes",
        "artifact_failures",
        "artifacts",
        "hook_duration",
        "mcp_duration",
        "output_produced",
        "output_sent",
        "tool_duration",
    )

    def __init__(self, meter: Any) -> None:
        self.tool_duration = meter.create_histogram(
            METRIC_TOOL_DURATION,
            unit="s",
            description="The duration of a single tool execution.",
            explicit_bucket_boundaries_advisory=list(TOOL_DURATION_BUCKETS_S),
        )
        self.mcp_duration = meter.create_histogram(
            METRIC_MCP_DURATION,
            unit="s",
            description="The duration of an MCP request, from sending it until the response.",
            explicit_bucket_boundaries_advisory=list(MCP_DURATION_BUCKETS_S),
        )
        self.hook_duration = meter.create_histogram(
            METRIC_HOOK_DURATION,
            unit="s",
            description="The duration of one hook run.",
            explicit_bucket_boundaries_advisory=list(HOOK_DURATION_BUCKETS_S),
        )
        self.output_produced = meter.create_counter(
            METRIC_OUTPUT_PRODUCED,
            unit="{char}",
            description="Code points of model-facing text the tool calls produced.",
        )
        self.output_sent = meter.create_counter(
            METRIC_OUTPUT_SENT,
            unit="{char}",
            description="Code points of tool text the model received, after the batch budget.",
        )
        self.artifacts = meter.create_counter(
            METRIC_ARTIFACTS, unit="{artifact}", description="Artifacts written to disk."
        )
        self.artifact_bytes = meter.create_counter(
            METRIC_ARTIFACT_BYTES, unit="By", description="Bytes written to artifacts."
        )
        self.artifact_failures = meter.create_counter(
            METRIC_ARTIFACT_FAILURES,
            unit="{failure}",
            description="Artifacts that could not be written.",
        )


class Otel:
    """The OpenTelemetry API, bound once on first use, and toolbatch's tracer and meters."""

    def __init__(self, trace: ModuleType, context: ModuleType, propagate: ModuleType) -> None:
        self.trace = trace
        self.context = context
        self.propagate = propagate
        self.tracers: dict[int, Any] = {}
        self.instruments: dict[int, Instruments] = {}
        self._no_sdk_tracer_providers = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._sdk_seen = False

    def sdk_configured(self) -> bool:
        """Whether a real (not proxy, not no-op) global tracer or meter provider is set.

        Once one is, it stays: the API lets a global provider be set only once. Until then
        this is asked once per batch, so it reads the API modules' globals
        (``opentelemetry.trace._TRACER_PROVIDER``, ``opentelemetry.metrics._internal.
        _METER_PROVIDER``) rather than calling ``get_tracer_provider()`` /
        ``get_meter_provider()``, each of which looks up a variable in ``os.environ`` (about
        0.8 µs here: most of the no-SDK cost of a batch). The variables they look up
        (``OTEL_PYTHON_TRACER_PROVIDER``, ``OTEL_PYTHON_METER_PROVIDER``) are honoured by
        calling them once, when the API is bound. An API without those globals is asked
        through the public calls.
        """
        if self._sdk_seen:
            return True
        tracer_provider = getattr(self.trace, "_TRACER_PROVIDER", _UNKNOWN)
        if tracer_provider is _UNKNOWN:
            tracer_provider = self.trace.get_tracer_provider()
        if tracer_provider is not None and not isinstance(
            tracer_provider, self._no_sdk_tracer_providers
        ):
            self._sdk_seen = True
            return True
        internal = sys.modules.get("opentelemetry.metrics._internal")
        if internal is None:
            return False
        meter_provider = getattr(internal, "_METER_PROVIDER", _UNKNOWN)
        if meter_provider is _UNKNOWN:
            meter_provider = internal.get_meter_provider()
        if meter_provider is None or type(meter_provider).__name__ in _NO_SDK_METER_PROVIDERS:
            return False
        self._sdk_seen = True
        return True

    def tracer(self) -> Any:
        """toolbatch's tracer on the configured (or global) provider."""
        provider = SETTINGS.tracer_provider
        key = id(provider)
        tracer = self.tracers.get(key)
        if tracer is None:
            if provider is None:
                tracer = self.trace.get_tracer(INSTRUMENTATION_NAME, _version())
            else:
                tracer = provider.get_tracer(INSTRUMENTATION_NAME, _version())
            self.tracers[key] = tracer
        return tracer

    def meters(self) -> Instruments:
        """toolbatch's instruments on the configured (or global) meter provider."""
        provider = SETTINGS.meter_provider
        key = id(provider)
        instruments = self.instruments.get(key)
        if instruments is None:
            if provider is None:
                from opentelemetry import metrics

                meter = metrics.get_meter(INSTRUMENTATION_NAME, _version())
            else:
                meter = provider.get_meter(INSTRUMENTATION_NAME, _version())
            instruments = self.instruments[key] = Instruments(meter)
        return instruments

    def current_span_is_valid(self) -> bool:
        return bool(self.trace.get_current_span().get_span_context().is_valid)


class _Binding:
    """The one ``Otel`` of the process, made on first use (``None`` when not installed)."""

    __slots__ = ("env_provider", "missing", "otel")

    def __init__(self) -> None:
        self.otel: Otel | None = None
        self.missing = False
        self.env_provider: bool | None = None
        """Whether the environment names a provider (``None``: not read yet)."""

    def get(self) -> Otel | None:
        if self.otel is not None or self.missing:
            return self.otel
        try:
            from opentelemetry import context, propagate, trace
        except ImportError:
            self.missing = True
            return None
        self.otel = Otel(trace, context, propagate)
        if "OTEL_PYTHON_TRACER_PROVIDER" in os.environ:
            trace.get_tracer_provider()  # loads the provider the variable names
        if "OTEL_PYTHON_METER_PROVIDER" in os.environ:
            from opentelemetry import metrics

            metrics.get_meter_provider()
        return self.otel


_BINDING: Final = _Binding()


def bound() -> Otel | None:
    """The API if telemetry is enabled and the API is installed, without further checks."""
    if not SETTINGS.enabled:
        return None
    return _BINDING.get()


def recording() -> Otel | None:
    """The API when spans or metrics would be recorded now, else ``None``.

    Recording means: enabled, the API installed, and a provider configured (through
    :func:`configure`, or a real global one). Asked once or twice per batch, so it is cheap
    when nothing is configured (see :meth:`Otel.sdk_configured`).
    """
    settings = SETTINGS
    if not settings.enabled:
        return None
    if settings.tracer_provider is not None or settings.meter_provider is not None:
        return _BINDING.get()
    otel = _BINDING.otel
    if otel is None:
        modules = sys.modules
        if "opentelemetry.trace" not in modules and "opentelemetry.metrics" not in modules:
            env_provider = _BINDING.env_provider
            if env_provider is None:
                # Read once (and again after ``configure``), as the API reads them once at
                # its first ``get_tracer_provider``: a lookup in ``os.environ`` encodes the
                # name each time, the most a batch paid here with telemetry off.
                env_provider = _BINDING.env_provider = any(
                    name in os.environ for name in _PROVIDER_VARIABLES
                )
            if not env_provider:
                return None  # nobody imported the API: no SDK can be set
        otel = _BINDING.get()
        if otel is None:
            return None
    return otel if otel.sdk_configured() else None


def propagating() -> Otel | None:
    """The API when a valid span is current (recorded or not): its context is what child
    processes get. Without an SDK that is a context someone attached (e.g. extracted from
    ``TRACEPARENT``), passed on as the API's no-op tracer would."""
    otel = bound()
    if otel is None or not otel.current_span_is_valid():
        return None
    return otel


P = ParamSpec("P")
R = TypeVar("R")
_reported: set[str] = set()


def never_raises(function: Callable[P, R]) -> Callable[P, R | None]:
    """Telemetry never breaks a batch: an exception (a bug, or a misbehaving SDK) is logged
    once per kind as ``telemetry.failed`` and the function returns ``None``."""

    @functools.wraps(function)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            kind = f"{function.__qualname__}:{type(exc).__name__}"
            if kind not in _reported:
                _reported.add(kind)
                log.warning("telemetry.failed", where=function.__qualname__, error=repr(exc))
            return None

    return guarded
