"""A run reset a second time, to a point of the first run from before the first reset's
branch, is answered on its own lineage: the turns it holds are the first run's, not
those the first reset's branch asked in their place. Before, the branch had replaced
the first run's turn files from its branch point on, and the second reset run's model
was given that branch's turns (a denial it never made) for turns its own history holds
otherwise (an approval and the command's output)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, ModelRequest, Role, ToolCall
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._client import decide
from lw_temporal.options import ModelCallOptions
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._reset_support import after_activities, pending, reset

DEFINITIONS = [Definition(id="lineage", approvals=(ApprovalRule(tool="bash", command="deploy"),))]


def _told(request: ModelRequest) -> list[ToolCall]:
    """Finish, saying every tool result the conversation holds, oldest first."""
    told = " | ".join(r.text for e in request.history for r in e.results)
    return [tool("finish", summary=told)]


MODEL = ScriptedModel(
    {
        ("lineage", Role.PLANNER): [
            [tool("bash", command="echo deploy >> one")],
            [tool("bash", command="echo deploy >> two")],
            _told,
        ]
    }
)


async def test_a_second_reset_reads_its_own_lineage(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_lineage@{task_queue}"
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=DEFINITIONS, model=MODEL,
        task_queue=task_queue, model_calls=ModelCallOptions(local_activity=False),
    ) as client:  # fmt: skip
        first = await client.start_workflow(
            "lw.Planner", "go", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        run_a = first.result_run_id or ""
        for n in range(2):  # both commands approved: the first run's lineage
            asked = await pending(client, workflow_id, run_a)
            await decide(client, workflow_id, asked.id, approve=True, by="carol", why=f"go {n}")
        told_a = (await first.result()).summary
        assert told_a.count("exit code 0") == 2, told_a
        turn_0, turn_1, _ = after_activities((await first.fetch_history()).events, "lw.model")

        # the first reset: back to the first approval, denied; its branch asks turns 1, 2
        run_b = await reset(client, first, turn_0)
        for _ in range(2):
            asked = await pending(client, workflow_id, run_b)
            await decide(client, workflow_id, asked.id, approve=False, by="dana", why="not now")
        handle_b = client.get_workflow_handle(workflow_id, run_id=run_b, result_type=AgentResult)
        told_b = (await asyncio.wait_for(handle_b.result(), 60)).summary
        assert "dana" in told_b and "exit code 0" not in told_b, told_b

        # the second reset: the first run again, past its first approval, before the
        # second (the turn it holds as approved the branch had asked as denied)
        run_c = await reset(client, first, turn_1)
        asked = await pending(client, workflow_id, run_c)
        await decide(client, workflow_id, asked.id, approve=True, by="erin", why="go again")
        handle_c = client.get_workflow_handle(workflow_id, run_id=run_c, result_type=AgentResult)
        told_c = (await asyncio.wait_for(handle_c.result(), 60)).summary
    assert "dana" not in told_c, told_c
    assert told_c.count("exit code 0") == 2, told_c
