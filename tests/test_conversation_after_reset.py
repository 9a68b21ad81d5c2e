"""A run reset to before a model turn asks the model again from there: turn files are
kept per chain of runs (a continue-as-new never asks a turn twice), and a reset run
is of the same chain, so it was handed the abandoned branch's answers. Here a command
approved and run (``exit code 0``) is reset to before its approval and denied: the
model's next turn must be told of the denial, not of the run it no longer made."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, ModelRequest, Role, ToolCall
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._client import decide
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._reset_support import pending, reset, task_ends

DEFINITIONS = [Definition(id="branch", approvals=(ApprovalRule(tool="bash", command="deploy"),))]
asked: list[str] = []


def _told(request: ModelRequest) -> list[ToolCall]:
    told = " | ".join(r.text for r in request.last_results())
    asked.append(told)
    return [tool("finish", summary=told)]


MODEL = ScriptedModel(
    {("branch", Role.PLANNER): [[tool("bash", command="echo deploy >> ran")], _told]}
)


async def test_a_reset_run_is_answered_on_its_own_branch(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_branch@{task_queue}"
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=DEFINITIONS, model=MODEL,
        task_queue=task_queue,
    ) as client:  # fmt: skip
        handle = await client.start_workflow(
            "lw.Planner", "go", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        first = await pending(client, workflow_id, handle.result_run_id or "")
        await decide(client, workflow_id, first.id, approve=True, by="carol", why="go")
        assert (await handle.result()).summary.startswith("exit code 0")
        events = (await handle.fetch_history()).events
        completed = task_ends(events)
        run = await reset(client, handle, completed[0])
        second = await pending(client, workflow_id, run)
        await decide(client, workflow_id, second.id, approve=False, by="dana", why="not again")
        result = await asyncio.wait_for(
            client.get_workflow_handle(workflow_id, run_id=run, result_type=AgentResult).result(),
            60,
        )
    assert "exit code 0" not in result.summary, result.summary
    assert "dana" in result.summary and "not again" in result.summary, result.summary
    assert len(asked) == 2 and asked[1] == result.summary  # the model was asked again
