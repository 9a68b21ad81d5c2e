"""A reply whose text is only whitespace (Claude often opens a tool call with "\\n\\n")
and a task of only whitespace reach the Messages API as no text block, or a stand-in:
the API refuses a request holding a whitespace-only text block (400
``text content blocks must contain non-whitespace text``), so the adapter sent the
reply back as one and the run's next turn failed for good."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import (
    AgentInput,
    AgentResult,
    ModelRequest,
    ModelResponse,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal.ids import AgentId
from lw_temporal.models import AnthropicModel
from lw_temporal.testing import running_worker

from ._provider_standins import AnthropicStandIn


async def test_blank_text_is_never_sent_as_a_text_block(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    async def brain(request: ModelRequest) -> ModelResponse:
        if len(request.history) < 2:
            call = ToolCall(name="bash", arguments={"command": "echo hi"})
            return ModelResponse(text="\n\n" if not request.history else " \t", tool_calls=[call])
        return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "ok"})])

    standin = AnthropicStandIn(brain)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")
    run = AgentId.planner("blank", task_queue)
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=[WorkflowDefinition(id="blank")],
        model=model, task_queue=task_queue,
    ) as client:  # fmt: skip
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task=" \n "), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert result.summary == "ok"
    assert standin.violations == []
