"""Provider failures as typed ``ApplicationError``s that say what to change.

Retryable kinds carry the provider's ``retry-after`` as the activity's next retry delay,
so Temporal's retry (visible in the history, durable across a worker crash) waits as
long as the provider asked; the SDK's own retries are off by default for that reason.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from ..errors._kinds import (
    MODEL_AUTH,
    MODEL_CONTEXT_OVERFLOW,
    MODEL_INVALID_REQUEST,
    MODEL_RATE_LIMITED,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
)

__all__ = [
    "MODEL_AUTH",
    "MODEL_CONTEXT_OVERFLOW",
    "MODEL_INVALID_REQUEST",
    "MODEL_RATE_LIMITED",
    "MODEL_REFUSED",
    "MODEL_UNAVAILABLE",
    "provider_error",
    "refused",
    "retry_after",
]

#: The longest wait a retry-after may ask for before the retry policy's own backoff.
MAX_RETRY_AFTER = timedelta(minutes=10)
_CONTEXT_WORDS = (
    "prompt is too long",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "context_length_exceeded",
    "input is too long",
)


def retry_after(headers: Mapping[str, str]) -> timedelta | None:
    """The delay a response asks for (``retry-after-ms``, ``retry-after`` in seconds or
    as an HTTP date), capped at MAX_RETRY_AFTER."""
    value: float | None = None
    try:
        if "retry-after-ms" in headers:
            value = float(headers["retry-after-ms"]) / 1000
        elif "retry-after" in headers:
            raw = headers["retry-after"]
            try:
                value = float(raw)
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(raw)
                value = parsed.timestamp() - time.time()
    except (TypeError, ValueError):
        return None
    # A proxy may send "nan" or "inf", which float() takes and timedelta() does not: a
    # number that is no number is ignored, one too large for a timedelta is the cap.
    if value is None or math.isnan(value) or value < 0:
        return None
    if value >= MAX_RETRY_AFTER.total_seconds():
        return MAX_RETRY_AFTER
    return timedelta(seconds=value)


def provider_error(
    *,
    provider: str,
    model: str,
    where: str,
    status: int | None,
    message: str,
    headers: Mapping[str, str],
    key_variable: str,
) -> ApplicationError:
    """The typed error for a failed provider call (``status`` None: no response)."""
    said = f"{provider} {model!r} ({where})"
    lowered = message.lower()
    if status is None:
        return ApplicationError(
            f"{said}: no response: {message}; retrying (check the network or base URL if "
            "it keeps failing)",
            type=MODEL_UNAVAILABLE,
        )
    if status == 429:
        delay = retry_after(headers)
        return ApplicationError(
            f"{said}: rate limited (429): {message}; retrying"
            + (f" after {delay.total_seconds():g}s as the provider asked" if delay else ""),
            type=MODEL_RATE_LIMITED,
            next_retry_delay=delay,
        )
    if status in (401, 403):
        return ApplicationError(
            f"{said}: the key was refused ({status}): {message}; set {key_variable} in the "
            "worker's environment to a valid key with access to this model",
            type=MODEL_AUTH,
            non_retryable=True,
        )
    if status == 413 or (status in (400, 422) and any(w in lowered for w in _CONTEXT_WORDS)):
        return ApplicationError(
            f"{said}: the conversation does not fit the model's context ({status}): "
            f"{message}; lower the plugin's ModelCallOptions.context_budget_tokens (or "
            "BashOptions.output_cap), or use a model with a larger context window",
            type=MODEL_CONTEXT_OVERFLOW,
            non_retryable=True,
        )
    if status == 404:
        return ApplicationError(
            f"{said}: not found (404): {message}; check the model name (--model "
            "provider:<model>) and the base URL",
            type=MODEL_INVALID_REQUEST,
            non_retryable=True,
        )
    if status in (408, 409) or status >= 500:
        return ApplicationError(
            f"{said}: the provider is unavailable or overloaded ({status}): {message}; retrying",
            type=MODEL_UNAVAILABLE,
            next_retry_delay=retry_after(headers),
        )
    return ApplicationError(
        f"{said}: the request was refused ({status}): {message}; check the adapter's "
        "options (model, max_tokens, extra request fields)",
        type=MODEL_INVALID_REQUEST,
        non_retryable=True,
    )


def refused(*, provider: str, model: str, where: str, detail: str) -> ApplicationError:
    return ApplicationError(
        f"{provider} {model!r} ({where}) refused to answer: {detail or 'no reason given'}; "
        "rephrase the task or the definition's instructions",
        type=MODEL_REFUSED,
        non_retryable=True,
    )


def sdk_error(
    err: Exception, *, provider: str, model: str, where: str, key_variable: str
) -> ApplicationError:
    """The typed error for an ``APIStatusError`` or ``APIConnectionError`` of either SDK:
    both are generated from one template, so a status error carries ``status_code``,
    ``message`` and the response, and a connection error has no response."""
    status = getattr(err, "status_code", None)
    return provider_error(
        provider=provider,
        model=model,
        where=where,
        status=status,
        message=str(err.message) if status is not None else str(err),  # type: ignore[attr-defined]
        headers=err.response.headers if status is not None else {},  # type: ignore[attr-defined]
        key_variable=key_variable,
    )
