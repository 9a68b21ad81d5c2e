"""What the agents did, as operators see it: spans, metrics and timeline summaries.

The modules here import OpenTelemetry only where a span is made (``_tracing``), so a
worker without the ``otel`` extra still gets metrics and readable timelines.
"""
