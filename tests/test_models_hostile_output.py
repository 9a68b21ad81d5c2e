"""A model's reply is untrusted input: tool arguments that cannot be stored or sent on
(a lone surrogate in valid JSON, NaN, nesting past the bound, more bytes than one call
may carry, arguments that are not an object), unknown tools, duplicate call ids and too
many calls each become an error result the model reads, never a failed ``lw.model``
(which Temporal would retry, paying for the reply again) nor a failed run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentResult,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._agent._replies import ARGUMENTS_CAP, MAX_TOOL_CALLS
from lw_temporal.models import AnthropicModel, OpenAIModel, ToolResult
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._provider_standins import AnthropicStandIn, OpenAIStandIn, StandIn

HOSTILE = WorkflowDefinition(id="hostile")
#: Put on the wire as the JSON escape of a lone surrogate (valid JSON, as a provider may
#: send it), which the SDK decodes into a str no UTF-8 encoder accepts.
MARK = "LONE-SURROGATE"
#: Put in OpenAI's arguments string as an array nested 3,000 deep.
DEEP = "DEEP-NEST"


def _then_finish(
    command: str, name: str = "bash", **more: Any
) -> Callable[[ModelRequest], Awaitable[ModelResponse]]:
    async def brain(request: ModelRequest) -> ModelResponse:
        if request.turn == 0:
            arguments = {"command": command, **more}
            call = ToolCall(id="call_1", name=name, arguments=arguments)
            return ModelResponse(text=f"listing {MARK}", tool_calls=[call], stop_reason="tool_use")
        (result,) = request.last_results()
        finish = ToolCall(id="call_2", name="finish", arguments={"summary": result.text})
        return ModelResponse(tool_calls=[finish], stop_reason="tool_use")

    return brain


class _Escaping:
    """A provider stand-in whose answers carry ``\\ud800`` where the brain wrote MARK,
    and a deep array where it wrote DEEP in a JSON string."""

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        answer = await super().handle(request)  # type: ignore[misc]
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "content-length"}
        body = answer.content.replace(MARK.encode(), b"\\ud800")
        body = body.replace(f'\\"{DEEP}\\"'.encode(), b"[" * 3000 + b"]" * 3000)
        return httpx2.Response(answer.status_code, headers=headers, content=body)


class _Anthropic(_Escaping, AnthropicStandIn):
    pass


class _OpenAI(_Escaping, OpenAIStandIn):
    pass


def _provider(name: str, command: str = f"ls {MARK}") -> tuple[StandIn, Model]:
    if name == "anthropic":
        a = _Anthropic(_then_finish(command))
        return a, AnthropicModel(client=a.client(), model="claude-sonnet-4-6")
    o = _OpenAI(_then_finish(command))
    return o, OpenAIModel(client=o.client(), model="gpt-5.5")


async def _run(env: WorkflowEnvironment, data_dir: Path, queue: str, model: Model) -> str:
    async with lw_worker(env, data_dir, queue, [HOSTILE], model) as client:
        result: AgentResult = await client.execute_workflow(
            "lw.Planner",
            "list",
            id=f"run_hostile@{queue}",
            task_queue=queue,
            result_type=AgentResult,
        )
    return result.summary


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_lone_surrogate_from_a_provider_is_one_error_result(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, provider: str
) -> None:
    standin, model = _provider(provider)
    summary = await _run(dev_env, data_dir, task_queue, model)
    # Two paid calls: the reply was kept once, its bad call answered with an error.
    assert len(standin.requests) == 2 and standin.violations == []
    assert "lone surrogate" in summary and "arguments['command']" in summary
    assert summary.startswith("bash: not run")


async def test_arguments_nested_past_the_stack_are_one_error_result(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    standin, model = _provider("openai", DEEP)
    summary = await _run(dev_env, data_dir, task_queue, model)
    assert len(standin.requests) == 2 and standin.violations == []
    assert "not a JSON object" in summary and "recursion" in summary, summary


async def test_a_lone_surrogate_in_claudes_text_editor_is_one_error_result(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    """Claude's native tools come back through the same reply normalization: a file
    text holding a lone surrogate is not written, and the run goes on."""
    brain = _then_finish(
        "create",
        name="str_replace_based_edit_tool",
        path="/mnt/scratch/own/note.txt",
        file_text=f"note {MARK}",
    )
    standin = _Anthropic(brain)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6", native_tools=True)
    summary = await _run(dev_env, data_dir, task_queue, model)
    assert len(standin.requests) == 2 and standin.violations == []
    assert summary.startswith("str_replace_based_edit_tool: not run"), summary
    assert "lone surrogate" in summary and "arguments['file_text']" in summary
    assert not (data_dir / "runs" / f"run_hostile@{task_queue}" / "scratch" / "note.txt").exists()


class Counted:
    """A script turn function that keeps what the model was sent."""

    def __init__(self) -> None:
        self.sent: list[list[ToolResult]] = []
        self.texts: list[str] = []

    def finish(self, request: ModelRequest) -> list[ToolCall]:
        self.sent.append(request.last_results())
        self.texts += [e.reply.text for e in request.history]
        return [tool("finish", summary="survived")]


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _calls(_: ModelRequest) -> list[ToolCall]:
    return [
        tool("memory_write", path="/mnt/memory/workflow/big.md", content="x" * ARGUMENTS_CAP),
        tool("bash", command=_nested(10_000)),
        tool("bash", command="echo", timeout_seconds=float("nan")),
        ToolCall(name="bash", arguments={}, invalid_arguments="[1, 2]"),
        tool("rm_rf_everything", path="/"),
        ToolCall(id="same", name="bash", arguments={"command": "echo one"}),
        ToolCall(id="same", name="bash", arguments={"command": "echo two"}),
        *(tool("no_such_tool") for _ in range(MAX_TOOL_CALLS)),
    ]


async def test_unusable_calls_are_answered_with_errors_in_one_paid_turn(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    counted = Counted()
    asked: list[int] = []

    def hostile(request: ModelRequest) -> list[ToolCall]:
        asked.append(request.turn)
        return _calls(request)

    turns: list[Callable[[ModelRequest], list[ToolCall]]] = [hostile, counted.finish]
    model = ScriptedModel({("hostile", Role.PLANNER): turns})
    async with lw_worker(dev_env, data_dir, task_queue, [HOSTILE], model) as client:
        result: AgentResult = await client.execute_workflow(
            "lw.Planner",
            "survive",
            id=f"run_hostile@{task_queue}",
            task_queue=task_queue,
            result_type=AgentResult,
        )
    assert result.summary == "survived" and asked == [0]
    (results,) = counted.sent
    assert len(results) == MAX_TOOL_CALLS  # the rest were dropped, and the reply says so
    assert "7 more tool calls were dropped" in counted.texts[0]
    big, deep, nan, not_object, unknown, one, two = results[:7]
    assert big.is_error and f"over the {ARGUMENTS_CAP}-byte limit" in big.text
    assert deep.is_error and "nested more than" in deep.text
    assert nan.is_error and "JSON cannot carry" in nan.text
    assert not_object.is_error and "not a JSON object: [1, 2]" in not_object.text
    assert unknown.is_error and "unknown tool 'rm_rf_everything'" in unknown.text
    assert (one.ok, two.ok) == (True, True) and one.call_id != two.call_id
    assert "one" in one.text and "two" in two.text
    assert all(r.is_error and "unknown tool" in r.text for r in results[7:])
    assert not (data_dir / "memory" / "workflows" / "hostile" / "big.md").exists()
