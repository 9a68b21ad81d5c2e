"""The interceptors a plugin installs: metrics always, spans when tracing is on (the
tracing module, and OpenTelemetry with it, is imported only then)."""

from __future__ import annotations

from temporalio.worker import Interceptor

from ._interceptor import TelemetryInterceptor


def telemetry_interceptors(
    tracing: object, *, trace_commands: bool = False, model: object = None
) -> list[Interceptor]:
    """The interceptors a plugin adds: metrics always, spans when ``tracing`` is
    ``True`` or a ``TracerProvider`` (OpenTelemetry is imported only then)."""
    name = getattr(model, "model", None)
    model_name = name if isinstance(name, str) and name else None
    if model_name is None and model is not None:
        model_name = type(model).__name__
    if tracing is False or tracing is None:
        return [TelemetryInterceptor(model_name=model_name)]
    from ._tracing import tracing_interceptors

    return tracing_interceptors(tracing, trace_commands=trace_commands, model_name=model_name)
