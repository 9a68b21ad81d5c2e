"""A decision that reaches a run after its request's deadline does not decide it: the
request was decided by its rule's ``on_timeout`` when the deadline passed, even if no
worker was there to see the timer fire. A reviewer's approval sent while the worker
was down, delivered together with the deadline's timer, is refused
(``LwApprovalRefused``, saying the request timed out) and the call is answered as
the rule says (here: denied, the command never ran). (Before, the reviewer was told
"approved by carol" while the run had already answered the call as timed out.)"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, ModelRequest, Role, ToolCall
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._audit import recorded
from lw_temporal._approvals._client import list_approvals
from lw_temporal._approvals._records import DECIDE_UPDATE, ApprovalDecision, Outcome
from lw_temporal.errors import APPROVAL_REFUSED
from lw_temporal.ids import DataLayout
from lw_temporal.testing import ScriptedModel, running_worker, tool

DEADLINE = timedelta(seconds=3)
DEFINITIONS = [
    Definition(
        id="late",
        approvals=(ApprovalRule(tool="bash", command="deploy", timeout=DEADLINE),),
    )
]


def _told(request: ModelRequest) -> list[ToolCall]:
    return [tool("finish", summary=" | ".join(r.text for r in request.last_results()))]


MODEL = ScriptedModel(
    {
        ("late", Role.PLANNER): [
            [tool("bash", command="echo deploy >> /mnt/scratch/own/deploy.log")],
            _told,
        ]
    }
)


async def test_an_approval_delivered_after_the_deadline_is_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_late@{task_queue}"

    def worker() -> AbstractAsyncContextManager[Client]:
        return running_worker(
            dev_env.client,
            data_dir=data_dir,
            definitions=DEFINITIONS,
            model=MODEL,
            task_queue=task_queue,
        )

    async with worker() as client:
        handle = await client.start_workflow(
            "lw.Planner", "Deploy.", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        for _ in range(300):
            if pending := (await list_approvals(client, workflow_id=workflow_id)).pending:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the request was never listed")
    # No worker now: the deadline passes, and a reviewer approves late.
    await asyncio.sleep(DEADLINE.total_seconds() + 2)
    decision = ApprovalDecision(request_id=pending[0].id, approve=True, by="carol", why="late")
    late = asyncio.create_task(
        handle.start_update(DECIDE_UPDATE, decision, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
    )
    await asyncio.sleep(1)
    async with worker():
        refused = False
        try:
            accepted = await asyncio.wait_for(late, timeout=60)
            told = await accepted.result()
            raise AssertionError(f"an approval delivered after the deadline was taken: {told}")
        except WorkflowUpdateFailedError as err:
            assert isinstance(err.cause, ApplicationError), err
            assert err.cause.type == APPROVAL_REFUSED
            assert "timed out" in err.cause.message, err.cause.message
            refused = True
        result = await handle.result()
    assert refused
    assert "before its approval timed out" in result.summary, result.summary
    layout = DataLayout.at(data_dir)
    assert not list(layout.root.rglob("deploy.log"))  # the command never ran
    (record,) = recorded(layout, tree=workflow_id)[0]
    assert record.outcome is Outcome.TIMED_OUT_DENIED and record.by == "timeout", record
