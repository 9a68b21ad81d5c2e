"""Provider failures become typed errors that say what to change: rate limits,
overload and 5xx are retried after the provider's retry-after; a refused key, an
invalid request and a context overflow are not retried; a refusal is surfaced."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal import Model, ModelRequest, ModelResponse
from lw_temporal.models import (
    MODEL_AUTH,
    MODEL_CONTEXT_OVERFLOW,
    MODEL_INVALID_REQUEST,
    MODEL_RATE_LIMITED,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
)

from ._model_support import REQUEST, model_pair
from ._provider_standins import Fault

PROVIDERS = ["anthropic", "openai"]
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def _error_body(provider: str) -> str:
    return "anthropic_error.json" if provider == "anthropic" else "openai_error.json"


async def _failure(model: Model) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await model.next_turn(REQUEST)
    return caught.value


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limits_and_overload_are_retried_after_retry_after(provider: str) -> None:
    standin, model = model_pair(provider)
    limited = f"{provider}_rate_limit.json"
    standin.faults = {
        0: Fault(429, limited, {"retry-after": "7"}),
        1: Fault(529 if provider == "anthropic" else 503, limited, {"retry-after-ms": "1500"}),
        2: Fault(500, limited),
    }
    rate = await _failure(model)
    assert (rate.type, rate.non_retryable, rate.next_retry_delay) == (
        MODEL_RATE_LIMITED, False, timedelta(seconds=7)
    )  # fmt: skip
    busy = await _failure(model)
    assert (busy.type, busy.non_retryable) == (MODEL_UNAVAILABLE, False)
    assert busy.next_retry_delay == timedelta(seconds=1.5)
    broken = await _failure(model)
    assert (broken.type, broken.non_retryable, broken.next_retry_delay) == (
        MODEL_UNAVAILABLE, False, None
    )  # fmt: skip
    # The SDK itself did not retry: Temporal's retry policy does, visibly.
    assert len(standin.requests) == 3
    reply = await model.next_turn(REQUEST)
    assert reply.tool_calls[0].name == "finish" and reply.usage.model_calls == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_key_names_the_variable_to_set(provider: str) -> None:
    standin, model = model_pair(provider)
    standin.faults = {0: Fault(401, _error_body(provider)), 1: Fault(403, _error_body(provider))}
    for _ in range(2):
        failure = await _failure(model)
        assert (failure.type, failure.non_retryable) == (MODEL_AUTH, True)
        assert KEYS[provider] in failure.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_context_overflow_and_invalid_requests_are_not_retried(provider: str) -> None:
    standin, model = model_pair(provider)
    standin.faults = {0: Fault(400, _error_body(provider)), 1: Fault(404, _error_body(provider))}
    overflow = await _failure(model)
    assert (overflow.type, overflow.non_retryable) == (MODEL_CONTEXT_OVERFLOW, True)
    assert "context_budget_tokens" in overflow.message
    missing = await _failure(model)
    assert (missing.type, missing.non_retryable) == (MODEL_INVALID_REQUEST, True)
    assert "model name" in missing.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refusal_is_surfaced(provider: str) -> None:
    async def refuse(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="I won't do that.", stop_reason="refusal")

    _, model = model_pair(provider, refuse)
    failure = await _failure(model)
    assert (failure.type, failure.non_retryable) == (MODEL_REFUSED, True)
    assert "won't do that" in failure.message or "refused" in failure.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_reply_cut_at_max_tokens_is_marked_for_continuation(provider: str) -> None:
    async def cut(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="I will now", stop_reason="max_tokens")

    _, model = model_pair(provider, cut)
    reply = await model.next_turn(REQUEST)
    assert (reply.stop_reason, reply.tool_calls, reply.text) == ("max_tokens", [], "I will now")
