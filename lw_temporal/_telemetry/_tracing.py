"""``LittleWorkflowPlugin(tracing=...)``: Temporal's OpenTelemetry interceptor plus lw spans.

Temporal's ``TracingInterceptor`` carries the trace context through every client
call, workflow, child workflow and activity header, so a pipeline started by a
traced client is one trace; lw adds, inside it, a span per agent run (role,
definition, workflow id) and per activity (see :mod:`._facts`).

``tracing=True`` exports with the standard OpenTelemetry environment variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_EXPORTER_OTLP_PROTOCOL``, ``OTEL_SERVICE_NAME``,
``OTEL_TRACES_EXPORTER``, ``OTEL_SDK_DISABLED``; with none set, OTLP/HTTP to
``http://localhost:4318/v1/traces``, quiet while no collector listens there: see
:mod:`._export`), or uses the application's own SDK tracer provider when one is already
set globally (else it sets its own globally). A ``TracerProvider`` is used as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

try:
    import opentelemetry.trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Link, Span, SpanKind, Tracer
    from opentelemetry.util.types import Attributes
    from temporalio.contrib.opentelemetry import TracingInterceptor
    from temporalio.contrib.opentelemetry import workflow as otel_workflow
except ImportError as err:  # pragma: no cover - the otel extra is in dev
    raise ImportError(
        "tracing needs OpenTelemetry: pip install 'lw-temporal[otel]' "
        f"(opentelemetry-api, -sdk and the OTLP exporter) ({err})"
    ) from err

from temporalio import workflow
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from ._export import span_exporter
from ._facts import workflow_attributes
from ._interceptor import TelemetryInterceptor
from ._quiet import QuietSpan

TRACER_NAME = "lw_temporal"
SERVICE_NAME = "lw-temporal"


def default_tracer_provider() -> TracerProvider | None:
    """The application's global SDK provider, or one exporting as the environment says;
    ``None`` when ``OTEL_SDK_DISABLED`` is true."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    current = opentelemetry.trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    named = "OTEL_SERVICE_NAME" in os.environ or "service.name" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    exporter = span_exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    # Global, so spans of instrumented libraries (HTTP clients of the model SDKs) and
    # of later callers in this process join the same export.
    opentelemetry.trace.set_tracer_provider(provider)
    return provider


class LabellingTracer(Tracer):
    """Temporal's spans with lw's labels, failures recorded without their messages
    (:class:`._quiet.QuietSpan`): every span Temporal's interceptor makes for
    a workflow (``StartWorkflow``, ``RunWorkflow``, ``StartActivity``,
    ``StartChildWorkflow``...) also carries the role, definition and workflow id read
    from its ``temporalWorkflowID``, so any of them can be filtered by agent."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        return QuietSpan(
            self._tracer.start_span(
                name,
                context,
                kind,
                _labelled(attributes),
                links,
                start_time,
                record_exception,
                set_status_on_exception,
            )
        )

    @contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        *args: Any,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
        **kwargs: Any,
    ) -> Iterator[Span]:
        """:meth:`start_span` (so the span is labelled) made current, as the SDK's own
        tracer does it; ``context`` to ``start_time`` as :meth:`start_span` takes them."""
        # The flags matter where the span is current: ``use_span`` applies them.
        span = self.start_span(name, *args, **kwargs)
        with opentelemetry.trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


def _labelled(attributes: Attributes) -> Attributes:
    workflow_id = (attributes or {}).get("temporalWorkflowID")
    if not isinstance(workflow_id, str) or "lw.role" in (attributes or {}):
        return attributes
    return {**workflow_attributes(workflow_id, None), **(attributes or {})}


def temporal_tracing(provider: opentelemetry.trace.TracerProvider) -> TracingInterceptor:
    """Temporal's tracing interceptor on ``provider``, its spans labelled by agent."""
    return TracingInterceptor(LabellingTracer(provider.get_tracer(TRACER_NAME)))


def tracing_interceptors(
    tracing: Any, *, trace_commands: bool = False, model_name: str | None = None
) -> list[Interceptor]:
    """Temporal's tracing interceptor and lw's span-making one, sharing one tracer."""
    provider = default_tracer_provider() if tracing is True else tracing
    if provider is None:
        return [TelemetryInterceptor(model_name=model_name)]
    if not isinstance(provider, opentelemetry.trace.TracerProvider):
        raise TypeError(
            f"tracing= takes True or an opentelemetry TracerProvider, not {type(provider).__name__}"
        )
    return [
        temporal_tracing(provider),
        _AgentTracing(
            provider.get_tracer(TRACER_NAME),
            trace_commands=trace_commands,
            model_name=model_name,
        ),
    ]


class _AgentTracing(TelemetryInterceptor):
    """Adds the per-agent span to the activity spans."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _AgentWorkflowInbound


class _AgentWorkflowInbound(WorkflowInboundInterceptor):
    """Marks each run of an agent (orchestrator, planner, step, dream) with its role and
    definition, as a span under Temporal's ``RunWorkflow`` span. Recorded only on first
    execution, never on replay (``completed_span`` checks)."""

    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        attributes = workflow_attributes(info.workflow_id, info.workflow_type)
        role = attributes.get("lw.role")
        if role is not None:
            definition = attributes.get("lw.definition_id")
            name = f"lw.{role}" + (f" {definition}" if definition else "")
            otel_workflow.completed_span(name, attributes=attributes)
        return await super().execute_workflow(input)
