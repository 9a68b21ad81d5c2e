"""``AnthropicModel`` refuses extended thinking when it is built, instead of on the
second turn: with ``thinking`` on, the Messages API refuses a tool result unless the
reply's thinking blocks come back with it ("a final assistant message must start with
a thinking block"), and lw does not keep them. ``{"type": "disabled"}`` and the other
request options are taken."""

from __future__ import annotations

import pytest

from lw_temporal import ModelRequest, ModelResponse
from lw_temporal.models import AnthropicModel

from ._provider_standins import AnthropicStandIn


async def _unused(request: ModelRequest) -> ModelResponse:
    raise AssertionError("no request is sent")


def test_thinking_is_refused_when_the_adapter_is_built() -> None:
    client = AnthropicStandIn(_unused).client()
    with pytest.raises(ValueError, match="extended thinking is not supported"):
        AnthropicModel(
            client=client, request_options={"thinking": {"type": "enabled", "budget_tokens": 2048}}
        )
    with pytest.raises(ValueError, match="leave 'thinking' out"):
        AnthropicModel(client=client, request_options={"thinking": {"type": "adaptive"}})
    taken = AnthropicModel(
        client=client, request_options={"thinking": {"type": "disabled"}, "temperature": 0.2}
    )
    assert taken.request_options["temperature"] == 0.2
