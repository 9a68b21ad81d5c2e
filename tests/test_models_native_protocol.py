"""Driven by each adapter against a strict stand-in of its provider's API, a long
planner run completes with every request valid under the native tool protocol: the
mount description in the system prompt, the output of turn 1 still in full at the last
turn, parallel calls answered together, a failed tool marked as an error, a reply cut at
max_tokens continued, and a 429 retried after its retry-after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._agent._conversation import CUT_NOTE
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel, OpenAIModel

from ._hierarchy_support import lw_worker
from ._provider_standins import AnthropicStandIn, Fault, OpenAIStandIn, StandIn

LONG = WorkflowDefinition(id="long", instructions="Print things, then finish.", max_turns=40)
TURNS = 24
PARALLEL_AT, FAIL_AT, CUT_AT = 3, 6, 9


def _print(turn: int) -> str:
    line = f"turn-{turn:02d} line %02d .....................\\n"
    return f"for i in $(seq 1 60); do printf '{line}' $i; done"


def _expected(turn: int) -> str:
    return "".join(f"turn-{turn:02d} line {i:02d} .....................\n" for i in range(1, 61))


async def _brain(request: ModelRequest) -> ModelResponse:
    turn = request.turn
    if turn == CUT_AT:
        return ModelResponse(text="Next I will print turn", stop_reason="max_tokens")
    if turn == PARALLEL_AT:
        calls = [
            ToolCall(name="bash", arguments={"command": _print(turn)}),
            ToolCall(name="memory_write", arguments={"path": "/mnt/memory/workflow/n.md",
                                                      "content": "note\n"}),
            ToolCall(name="bash", arguments={"command": "echo second"}),
        ]  # fmt: skip
        return ModelResponse(text="Three at once.", tool_calls=calls)
    if turn == FAIL_AT:
        return ModelResponse(tool_calls=[ToolCall(name="bash", arguments={"command": "exit 3"})])
    if turn < TURNS:
        return ModelResponse(
            tool_calls=[ToolCall(name="bash", arguments={"command": _print(turn)})]
        )
    return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "done"})])


def _adapter(provider: str) -> tuple[StandIn, Model]:
    if provider == "anthropic":
        anthropic_standin = AnthropicStandIn(_brain)
        return anthropic_standin, AnthropicModel(
            client=anthropic_standin.client(), model="claude-sonnet-4-6"
        )
    openai_standin = OpenAIStandIn(_brain)
    return openai_standin, OpenAIModel(client=openai_standin.client(), model="gpt-5.5")


def _results(provider: str, body: dict[str, Any]) -> list[tuple[str, bool]]:
    """Every tool result of a request body: (text, is_error)."""
    if provider == "anthropic":
        return [
            (b["content"], b["is_error"])
            for m in body["messages"]
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
    return [
        (m["content"].removeprefix("ERROR: "), m["content"].startswith("ERROR: "))
        for m in body["messages"]
        if m["role"] == "tool"
    ]


def _system(provider: str, body: dict[str, Any]) -> str:
    if provider == "anthropic":
        return "".join(b["text"] for b in body["system"])
    return str(body["messages"][0]["content"])


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_long_planner_run_speaks_the_native_protocol(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, provider: str
) -> None:
    standin, model = _adapter(provider)
    limited = "anthropic_rate_limit.json" if provider == "anthropic" else "openai_rate_limit.json"
    standin.faults[2] = Fault(429, limited, {"retry-after": "1"})
    run = AgentId.planner("long", task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, [LONG], model) as client:
        result = await client.execute_workflow(
            "lw.Planner",
            AgentInput(task="Print one block per turn."),
            id=str(run),
            task_queue=task_queue,
            result_type=AgentResult,
        )
        history = await client.get_workflow_handle(str(run)).fetch_history()

    assert standin.violations == []
    assert result.summary == "done" and result.turns == TURNS + 1
    # One request per turn, plus the one answered 429 and retried as it was.
    requests = standin.requests
    assert len(requests) == TURNS + 2
    assert requests[2] == requests[3]
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert 2 in attempts

    for body in requests:
        system = _system(provider, body)
        assert "Scratch mounts (ephemeral, this run only):" in system
        assert "/mnt/memory/workflow/ (rw)" in system and "/mnt/scratch/own/ (rw)" in system
        assert "Print things, then finish." in system
    last = _results(provider, requests[-1])
    # Turn 1's output in full at the last turn, and every later one too.
    assert _expected(0) in last[0][0]
    assert all(any(_expected(t) in text for text, _ in last) for t in range(TURNS) if t not in
               (FAIL_AT, CUT_AT))  # fmt: skip
    assert [error for text, error in last if "exit code 3" in text] == [True]
    after_cut = json.dumps(requests[-1])
    assert json.dumps(CUT_NOTE)[1:-1] in after_cut

    assert result.usage.model_calls == TURNS + 1
    assert result.usage.input_tokens == (TURNS + 1) * 2120
    assert result.usage.cached_tokens == (TURNS + 1) * 2000
    assert result.usage.output_tokens == (TURNS + 1) * 40
    if provider == "anthropic":
        marks = json.dumps(requests[-1]).count('"cache_control"')
        assert marks == 4  # tools, system, the previous and the newest user message
