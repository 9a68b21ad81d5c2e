"""One reply of parallel calls whose results together outgrow the context budget does
not end the run: the newest results, which are never cleared, are each cut to an equal
share of the room left for them, their head and tail shown and the whole result saved
in the agent's scratch, so the model reads every result within its budget and the
session goes on (before, the next turn failed with LwModelContextOverflow)."""

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
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.models import AnthropicModel
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import running_worker

from ._provider_standins import AnthropicStandIn

BUDGET = 20_000
READS = 4


def _reading(i: int) -> str:
    """About 63 KB of output (under the 64 KiB output cap), numbered per reader."""
    return f"seq -w 1 9000 | sed 's/^/{i} /'"


async def test_parallel_results_beyond_the_budget_are_cut_not_fatal(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    seen: list[list[str]] = []

    async def brain(request: ModelRequest) -> ModelResponse:
        if not request.history:
            calls = [
                ToolCall(name="bash", arguments={"command": _reading(i)}) for i in range(READS)
            ]
            return ModelResponse(text="Reading four files at once.", tool_calls=calls)
        seen.append([r.text for r in request.history[-1].results])
        return ModelResponse(tool_calls=[ToolCall(name="finish", arguments={"summary": "read"})])

    standin = AnthropicStandIn(brain)
    model = AnthropicModel(client=standin.client(), model="claude-sonnet-4-6")
    run = AgentId.planner("wide", task_queue)
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=[WorkflowDefinition(id="wide")],
        model=model, task_queue=task_queue,
        model_calls=ModelCallOptions(context_budget_tokens=BUDGET),
    ) as client:  # fmt: skip
        result = await client.execute_workflow(
            "lw.Planner", AgentInput(task="Read."), id=str(run), task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
    assert standin.violations == []
    assert result.summary == "read"
    [texts] = seen
    assert len(texts) == READS
    # Together they fit the budget (lw counts 3 bytes a token), the rest of the
    # request (system prompt, tools, task) included.
    assert sum(len(t.encode()) for t in texts) <= BUDGET * 3 - 5_000
    scratch = DataLayout.at(data_dir).scratch(run)
    for i, text in enumerate(texts):
        assert text.startswith("exit code 0\nstdout:\n" + f"{i} 0001\n"), text[:80]
        assert f"{i} 9000" in text  # the tail is kept too
        assert "[cut to fit the context budget" in text, text[-300:]
        where = text.rsplit(" are in ", 1)[1].split(":", 1)[0]
        saved = (scratch / where.removeprefix("/mnt/scratch/own/")).read_text()
        assert saved.count("\n") > 9000 and f"{i} 4500\n" in saved
