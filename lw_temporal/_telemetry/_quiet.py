"""Temporal's spans without exception text.

Temporal's ``TracingInterceptor`` records each failure on its spans as OpenTelemetry
does by default: the status description ``<type>: <message>`` and an ``exception``
event with the message and the formatted traceback, every chained cause's message
included. lw's failures can quote a run's text (a model's refusal quotes its reply),
which the payload codec keeps out of the history; a span exporter would send it to a
collector in the clear. :class:`QuietSpan` keeps what tells the failure apart (the
exception's class, an ``ApplicationError``'s type, the frames of its traceback) and
drops its message, as lw's own activity spans do.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import Span, SpanContext, Status, StatusCode
from opentelemetry.util.types import AnyValue, Attributes

from ..errors._kinds import error_type


def failure_kind(exception: BaseException) -> str:
    """``LwModelRefused`` for an lw error, the class name for any other."""
    return error_type(exception) or type(exception).__name__


class QuietSpan(Span):
    """A span whose failures are recorded by kind, never by message."""

    def __init__(self, span: Span) -> None:
        self._span = span

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        frames = "".join(traceback.format_tb(exception.__traceback__))
        self._span.add_event(
            "exception",
            {
                "exception.type": type(exception).__name__,
                "exception.message": failure_kind(exception),
                "exception.stacktrace": frames,
                "exception.escaped": str(escaped),
                **(attributes or {}),
            },
            timestamp,
        )

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if isinstance(status, Status):
            if status.description:  # "<class>: <message>", as OpenTelemetry and Temporal write it
                status = Status(status.status_code, status.description.split(":", 1)[0])
        else:
            description = description.split(":", 1)[0] if description else None
        self._span.set_status(status, description)

    # -- everything else as the span does it -------------------------------------------
    def end(self, end_time: int | None = None) -> None:
        self._span.end(end_time)

    def get_span_context(self) -> SpanContext:
        return self._span.get_span_context()

    def set_attributes(self, attributes: Mapping[str, AnyValue]) -> None:
        self._span.set_attributes(attributes)

    def set_attribute(self, key: str, value: AnyValue) -> None:
        self._span.set_attribute(key, value)

    def add_event(
        self, name: str, attributes: Attributes = None, timestamp: int | None = None
    ) -> None:
        self._span.add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        self._span.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        self._span.update_name(name)

    def is_recording(self) -> bool:
        return self._span.is_recording()

    def __getattr__(self, name: str) -> Any:  # the SDK span's own extras (name, ...)
        return getattr(self._span, name)


__all__ = ["QuietSpan", "failure_kind"]
