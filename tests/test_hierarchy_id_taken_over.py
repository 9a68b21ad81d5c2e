"""A client that takes over a running planner's workflow ID (``TERMINATE_EXISTING``:
the server terminates the run and starts a new one under its ID) gets a run that is
refused at its first activity with ``LwWorkflowIdTaken``: it reads nothing of the
first run's scratch (its first command prints it) and changes nothing there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.testing import WorkflowEnvironment

from lw_temporal import ModelRequest, Role, ToolCall, WorkflowDefinition
from lw_temporal.errors import WORKFLOW_ID_TAKEN
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import failure_type, lw_worker

SECRET = "kumquat-ledger-5502"
TAKEN_OVER: list[bool] = []


def _first(request: ModelRequest) -> list[ToolCall]:
    if TAKEN_OVER:  # the second run under the ID
        return [
            tool("bash", command="cat /mnt/scratch/own/secret.txt; echo x > /mnt/scratch/own/b")
        ]
    return [tool("bash", command=f"echo {SECRET} > /mnt/scratch/own/secret.txt; sleep 60")]


async def test_a_run_started_over_a_running_planner_is_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    TAKEN_OVER.clear()
    model = ScriptedModel({("victim", Role.PLANNER): [_first]})
    planner = f"run_victim@{task_queue}"
    secret = data_dir / "runs" / planner / "scratch" / "secret.txt"
    async with lw_worker(
        dev_env, data_dir, task_queue, [WorkflowDefinition(id="victim")], model
    ) as client:
        first = await client.start_workflow("lw.Planner", "go", id=planner, task_queue=task_queue)
        for _ in range(300):
            if secret.exists() and secret.read_text().strip() == SECRET:
                break
            await asyncio.sleep(0.1)
        TAKEN_OVER.append(True)
        again = await client.start_workflow(
            "lw.Planner", "go", id=planner, task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
        )  # fmt: skip
        assert again.result_run_id != first.result_run_id
        assert await failure_type(again) == WORKFLOW_ID_TAKEN
        try:
            await again.result()
        except WorkflowFailureError as err:
            assert planner in str(err.cause) and "new ID" in str(err.cause)
    assert secret.read_text().strip() == SECRET
    assert not (secret.parent / "b").exists()
