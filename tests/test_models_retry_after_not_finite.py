"""A rate limit whose ``retry-after`` is not a finite number of seconds (``inf``,
``nan``, ``1e400``: an OpenAI-compatible proxy may send anything) is still the typed,
retried ``LwModelRateLimited``: an infinite wait is capped like any long one, a
number that is no number is ignored (the retry policy's own backoff applies), and the
header never turns the failure into an untyped ``ValueError`` or ``OverflowError``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal.models import MODEL_RATE_LIMITED
from lw_temporal.models._errors import MAX_RETRY_AFTER

from ._model_support import REQUEST, model_pair
from ._provider_standins import Fault


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize(
    ("header", "value", "delay"),
    [
        ("retry-after", "inf", MAX_RETRY_AFTER),
        ("retry-after", "1e400", MAX_RETRY_AFTER),
        ("retry-after", "nan", None),
        ("retry-after-ms", "nan", None),
        ("retry-after-ms", "inf", MAX_RETRY_AFTER),
    ],
)
async def test_a_rate_limit_with_a_non_finite_retry_after_stays_typed(
    provider: str, header: str, value: str, delay: timedelta | None
) -> None:
    standin, model = model_pair(provider)
    standin.faults = {0: Fault(429, f"{provider}_rate_limit.json", {header: value})}
    with pytest.raises(ApplicationError) as caught:
        await model.next_turn(REQUEST)
    failure = caught.value
    assert (failure.type, failure.non_retryable) == (MODEL_RATE_LIMITED, False)
    assert failure.next_retry_delay == delay
