"""Trace context for child processes: ``TRACEPARENT`` / ``TRACESTATE`` in their environment.

[ENV-CARRIERS] (``specification/context/env-carriers.md``): the configured
``TextMapPropagator`` injects into an environment carrier whose keys are normalised
(uppercase, anything outside ``[A-Za-z0-9_]`` becomes ``_``, ``_`` before a leading digit),
so W3C Trace Context becomes ``TRACEPARENT`` and ``TRACESTATE`` (and W3C Baggage
``BAGGAGE``). The parent copies its environment for each child and injects into the copy;
its own environment is never changed.

The keys the propagator writes are first removed from the copy, so a child never sees an
inherited ``TRACESTATE`` next to a new ``TRACEPARENT``. Nothing is added when telemetry is
off or no valid span is current.

MCP requests need nothing here: the MCP SDK (``mcp`` >= 2.3) injects the current context
into ``params._meta`` of every request it sends, under the unprefixed keys SEP-414 names,
and the scheduler makes the call's ``execute_tool`` span current while its producer runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from typing import Final

from toolbatch.telemetry._runtime import never_raises, propagating

__all__ = ["child_environment", "environment_key"]

_NOT_NAME: Final = re.compile(r"[^A-Za-z0-9_]")


def environment_key(key: str) -> str:
    """``key`` normalised for an environment carrier ([ENV-CARRIERS] "Key Name Normalization")."""
    if not key:
        return "_"
    name = _NOT_NAME.sub("_", key).upper()
    return f"_{name}" if name[0].isdigit() else name


class _EnvironmentSetter:
    """A ``Setter`` writing normalised keys into an environment copy."""

    def set(self, carrier: MutableMapping[str, str], key: str, value: str) -> None:
        carrier[environment_key(key)] = value


_SETTER: Final = _EnvironmentSetter()


def child_environment(env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """The environment for one child process, with the current trace context injected.

    Args:
        env: the child's environment as it would be without telemetry (``None``: this
            process's own, as ``subprocess`` takes it).

    Returns:
        ``env`` itself when there is nothing to propagate; otherwise a new dict: a copy of
        ``env`` (or of ``os.environ``) with ``TRACEPARENT`` (and ``TRACESTATE``,
        ``BAGGAGE`` when the context has them) set.
    """
    injected = _inject(env)
    return env if injected is None else injected


@never_raises
def _inject(env: Mapping[str, str] | None) -> dict[str, str] | None:
    otel = propagating()
    if otel is None:
        return None
    carrier = dict(os.environ if env is None else env)
    propagator = otel.propagate.get_global_textmap()
    for field in propagator.fields:
        carrier.pop(environment_key(field), None)
    propagator.inject(carrier, setter=_SETTER)
    return carrier
