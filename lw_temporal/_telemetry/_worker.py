"""Telemetry options of ``lw-temporal worker``: a Prometheus endpoint and tracing.

Metrics come from the Temporal runtime (the SDK's own worker metrics and lw's, see
:mod:`._facts`), so one ``/metrics`` endpoint serves both; the port is what a
deployment scrapes (the compose worker publishes it).
"""

from __future__ import annotations

import argparse
from typing import Any

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics (Temporal's and lw's) on this port at /metrics",
    )
    parser.add_argument(
        "--metrics-host", default="0.0.0.0", help="address the metrics endpoint binds"
    )
    parser.add_argument(
        "--tracing",
        action="store_true",
        help="OpenTelemetry spans, exported by the standard OTEL_* variables (extra: otel)",
    )
    parser.add_argument(
        "--trace-commands",
        action="store_true",
        help="put each command's text on its lw.bash span (default: its sha256 only)",
    )


def plugin_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``LittleWorkflowPlugin`` keywords the options ask for."""
    options: dict[str, Any] = {}
    if args.tracing:
        from ..options._groups import BashOptions

        options["tracing"] = True
        options["bash"] = BashOptions(trace_commands=args.trace_commands)
    return options


def worker_runtime(args: argparse.Namespace) -> Runtime | None:
    """A runtime serving Prometheus metrics on ``--metrics-port``, or None for the default."""
    if args.metrics_port is None:
        return None
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=f"{args.metrics_host}:{args.metrics_port}")
        )
    )


def flush_tracing() -> None:
    """Export the spans still buffered before the process exits."""
    try:
        import opentelemetry.trace
    except ImportError:
        return
    flush = getattr(opentelemetry.trace.get_tracer_provider(), "force_flush", None)
    if callable(flush):
        flush()
