"""Where ``tracing=True`` sends spans: the exporter the standard variables ask for,
quiet while no collector listens.

The OTLP default endpoint is ``http://localhost:4318/v1/traces`` (``grpc``:
``localhost:4317``), as the OpenTelemetry specification sets it. A worker traced by
default on a machine without a collector would otherwise log a retry warning every
few seconds and hold each batch for the exporter's 10 s timeout (a process exit too).
So the exporter first checks that something accepts a TCP connection at the
endpoint: when nothing does, the batch is dropped at once, one line says so and where
spans would go, and the next look is a minute later; once a collector answers, one
line says that too.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter, SpanExportResult

_log = logging.getLogger("lw_temporal.tracing")

#: The OTLP endpoints the specification gives when no variable names one.
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318/v1/traces"
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
#: Seconds between two looks for a collector that was not there.
ABSENT_RECHECK_SECONDS = 60.0
_CONNECT_TIMEOUT = 1.0


def _env(*names: str) -> str:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return ""


def otlp_protocol() -> str:
    return (
        _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL").lower()
        or "http/protobuf"
    )


def otlp_endpoint() -> str:
    """The traces endpoint the exporter will use, as the OTLP variables resolve it."""
    explicit = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if explicit:
        return explicit
    base = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    if otlp_protocol() == "grpc":
        return base or DEFAULT_GRPC_ENDPOINT
    return base.rstrip("/") + "/v1/traces" if base else DEFAULT_HTTP_ENDPOINT


def describe_export() -> str:
    """One phrase naming where ``tracing=True`` sends spans (for a worker's ready line)."""
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return "off: OTEL_SDK_DISABLED=true"
    kind = (_env("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if kind in ("none", "console"):
        return f"spans: OTEL_TRACES_EXPORTER={kind}"
    return f"spans to {otlp_endpoint()} (OTLP {otlp_protocol()})"


def span_exporter() -> SpanExporter | None:
    """The span exporter the standard environment variables ask for."""
    kind = (_env("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if kind == "none":
        return None
    if kind == "console":
        return ConsoleSpanExporter()
    protocol = otlp_protocol()
    try:
        if protocol == "grpc":
            import importlib

            grpc = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
            exporter: SpanExporter = grpc.OTLPSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
    except ImportError as err:
        raise ImportError(
            f"OTLP export ({protocol}) needs its exporter package: "
            "pip install 'lw-temporal[otel]' (http/protobuf), or "
            f"opentelemetry-exporter-otlp-proto-grpc for grpc ({err})"
        ) from err
    return QuietWhenAbsent(exporter, otlp_endpoint())


def collector_listening(endpoint: str) -> bool:
    """Whether something accepts a TCP connection at ``endpoint``'s host and port."""
    parts = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), _CONNECT_TIMEOUT):
            return True
    except (OSError, ValueError):
        return False


class QuietWhenAbsent(SpanExporter):
    """``inner``, skipped (batches dropped, one line logged) while nothing accepts a
    connection at ``endpoint``."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner = inner
        self.endpoint = endpoint
        self._absent_until = 0.0
        self._said_absent = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            now = time.monotonic()
            if now < self._absent_until:
                return SpanExportResult.FAILURE
            if not collector_listening(self.endpoint):
                self._absent_until = now + ABSENT_RECHECK_SECONDS
                if not self._said_absent:
                    self._said_absent = True
                    _log.warning(
                        "no OpenTelemetry collector at %s: spans are dropped until one "
                        "answers (looked for again every %.0f s); set "
                        "OTEL_EXPORTER_OTLP_ENDPOINT to send them elsewhere, or "
                        "OTEL_TRACES_EXPORTER=none",
                        self.endpoint,
                        ABSENT_RECHECK_SECONDS,
                    )
                return SpanExportResult.FAILURE
            if self._said_absent:
                self._said_absent = False
                _log.warning("an OpenTelemetry collector answers at %s now", self.endpoint)
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
