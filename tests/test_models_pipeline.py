"""The sample pipeline end to end through each real adapter (the official SDK over a
strict stand-in of its provider's API) on the dev server: every request valid, the
same memory and scratch written as with the scripted model, and the token usage of
every model call summed up the tree into the pipeline's result."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, Model, ModelRequest, ModelResponse
from lw_temporal.ids import PROGRESS_QUERY, AgentId, DataLayout, Progress
from lw_temporal.models import AnthropicModel, OpenAIModel
from workflows.pipeline import DEFINITIONS, sample_model

from ._hierarchy_support import lw_worker
from ._provider_standins import AnthropicStandIn, OpenAIStandIn, StandIn

SCRIPT = sample_model()


async def _scripted(request: ModelRequest) -> ModelResponse:
    return await SCRIPT.next_turn(request)


def _adapter(provider: str) -> tuple[StandIn, Model]:
    if provider == "anthropic":
        anthropic_standin = AnthropicStandIn(_scripted)
        client = anthropic_standin.client()
        return anthropic_standin, AnthropicModel(client=client, model="claude-sonnet-4-6")
    openai_standin = OpenAIStandIn(_scripted)
    return openai_standin, OpenAIModel(client=openai_standin.client(), model="gpt-5.5")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_the_sample_pipeline_runs_through_the_adapter(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, provider: str
) -> None:
    standin, model = _adapter(provider)
    pipeline = AgentId.orchestrator(task_queue)
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, model) as client:
        result = await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(task="Review and score candidate Dana Reyes for job ABC-123."),
            id=str(pipeline),
            task_queue=task_queue,
            result_type=AgentResult,
        )
        progress = await client.get_workflow_handle(str(pipeline)).query(
            PROGRESS_QUERY, result_type=Progress
        )
    assert standin.violations == []
    assert result.summary == "candidate Dana Reyes reviewed and scored 8/10"
    layout = DataLayout.at(data_dir)
    assert "reviewed and scored" in (next(layout.memory.glob("pipelines/*/history.md")).read_text())
    assert (layout.workflow_memory("candidate-review") / "lessons-learned.md").exists()
    # Every model call of the tree (orchestrator, 2 planners, 5 steps) is counted once.
    calls = len(standin.requests)
    assert result.tree_usage.model_calls == calls
    assert result.tree_usage.input_tokens == calls * 2120
    assert result.tree_usage.cached_tokens == calls * 2000
    assert result.usage.model_calls == 4 < calls
    assert progress.usage == result.usage and progress.tree_usage == result.tree_usage
