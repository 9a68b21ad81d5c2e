"""A reply's tool calls each get an id no other call of the reply has, even when the ids
the reply gave collide with the ones lw makes up for its duplicates: the protocols bind
each result to its call by id, and Anthropic refuses a request repeating a tool_use id
(README, "Plugging in a real model": "every call gets a unique id")."""

from __future__ import annotations

import pytest

from lw_temporal._agent._replies import normalized
from lw_temporal.models import ModelResponse, ToolCall


@pytest.mark.parametrize(
    "ids",
    [
        ["x", "x_2", "x"],
        ["x", "x", "x_1", "x_1"],
        ["call_3_1", ""],
        ["", "call_3_0", ""],
        ["a" * 70, "a" * 70, "a" * 56 + "_1"],
        ["a", "a", "a"],
    ],
)
def test_every_call_of_a_reply_has_its_own_id(ids: list[str]) -> None:
    reply = ModelResponse(
        text="",
        tool_calls=[ToolCall(name="bash", arguments={"command": "true"}, id=i) for i in ids],
    )
    kept = [call.id for call in normalized(reply, turn=3).tool_calls]
    assert len(set(kept)) == len(kept), kept
    assert all(0 < len(call_id) <= 64 for call_id in kept), kept
