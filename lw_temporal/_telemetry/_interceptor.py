"""The worker interceptor that turns each lw activity into a span and metric points.

It sits inside Temporal's own tracing interceptor (worker interceptors run after the
client's), so an activity's lw span is a child of Temporal's ``RunActivity`` span and
the whole pipeline stays one trace. Metrics go to the Temporal runtime's meter
(``activity.metric_meter()``), which is a no-op unless the runtime has a metrics sink
(``lw-temporal worker --metrics-port``, or your own ``Runtime``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from ._facts import Facts, record_metrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class TelemetryInterceptor(Interceptor):
    """Spans (when given a tracer) and metrics for every lw activity.

    Args:
        tracer: where spans go; ``None`` records metrics only.
        trace_commands: put each command's text (capped) on its ``lw.bash`` span;
            off by default, since commands may carry what their agent was given.
        model_name: the model this worker's agents use, for spans and token metrics
            when the model's reply does not name itself.
    """

    def __init__(
        self,
        tracer: Tracer | None = None,
        *,
        trace_commands: bool = False,
        model_name: str | None = None,
    ) -> None:
        self.tracer = tracer
        self.trace_commands = trace_commands
        self.model_name = model_name

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next, self)


class _ActivityInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, root: TelemetryInterceptor) -> None:
        super().__init__(next)
        self.root = root

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        facts = Facts(info.activity_type, model_name=self.root.model_name)
        facts.on_start(info, input.args, trace_commands=self.root.trace_commands)
        tracer = self.root.tracer
        span_cm: contextlib.AbstractContextManager[Any] = (
            tracer.start_as_current_span(
                facts.span_name,
                attributes=facts.attributes,
                record_exception=False,
                set_status_on_exception=False,
            )
            if tracer is not None
            else contextlib.nullcontext()
        )
        with span_cm as span:
            try:
                result = await self.next.execute_activity(input)
            except BaseException as err:
                facts.on_error(err)
                _finish(span, facts, error=True)
                _record(facts)
                raise
            facts.on_result(result)
            _finish(span, facts, error=False)
            _record(facts)
            return result


def _finish(span: Any, facts: Facts, *, error: bool) -> None:
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_attributes(facts.attributes)
    if error:
        # The type names the failure kind; the message may quote paths or content.
        span.set_status(Status(StatusCode.ERROR, str(facts.attributes.get("lw.error.type"))))


def _record(facts: Facts) -> None:
    if not facts.counters and not facts.durations:
        return
    with contextlib.suppress(RuntimeError):
        record_metrics(activity.metric_meter(), facts)
