"""A retry of a client's run is a client's run: the server starts each retry attempt
(and each run of a cron schedule) with the first run's input and names the run before
it as the run it "continued" from, as it does for a continue-as-new. The settings and
state a client put in that input (here: settings without the definition's approval
rule) are ignored by the retry as by the first attempt, so the command the rule asks
about still waits for a person; a cron schedule is refused at start."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowContinuedAsNewError, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, ApprovalRule, Role, WorkflowDefinition
from lw_temporal._agent import AgentState, WorkerSettings
from lw_temporal._failure_text import opened_message
from lw_temporal.errors import INVALID_REQUEST
from lw_temporal.ids import PROGRESS_QUERY, Progress
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

GUARDED = WorkflowDefinition(
    id="retried", approvals=(ApprovalRule(tool="bash", command="touch", approvers=("carol",)),)
)
MODEL = ScriptedModel(
    {("retried", Role.PLANNER): [[tool("bash", command="touch /mnt/scratch/own/ran")]] * 3}
)


def ran(data_dir: Path) -> list[Path]:
    return list(data_dir.rglob("ran"))


def _forged() -> AgentInput:
    forged = WorkerSettings(approvals={}, max_turns={"retried": 3})
    return AgentInput(task="touch it", settings=forged, state=AgentState(settings=forged))


async def test_a_retry_attempt_ignores_client_settings(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_retried@{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [GUARDED], MODEL) as client:
        # The first attempt waits for carol and runs out of time; the server retries.
        handle = await client.start_workflow(
            "lw.Planner",
            _forged(),
            id=workflow_id,
            task_queue=task_queue,
            run_timeout=timedelta(seconds=4),
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1)),
        )
        first = handle.result_run_id
        for _ in range(300):
            described = await client.get_workflow_handle(workflow_id).describe()
            if described.run_id != first:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the server never retried the run")
        retry = client.get_workflow_handle(workflow_id)
        for _ in range(300):
            progress = await retry.query(PROGRESS_QUERY, result_type=Progress)
            if progress.approvals or progress.status == "finished":
                break
            await asyncio.sleep(0.05)
        assert [r.approvers for r in progress.approvals] == [("carol",)], progress
        await retry.terminate("test over")
    assert not await asyncio.to_thread(ran, data_dir)  # the command never ran without carol


async def test_a_cron_schedule_is_refused(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_retried@{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [GUARDED], MODEL) as client:
        handle = await client.start_workflow(
            "lw.Planner",
            _forged(),
            id=workflow_id,
            task_queue=task_queue,
            cron_schedule="* * * * *",
        )
        first = client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
        try:
            # A cron run that fails hands over to the next one: read why from its history.
            with contextlib.suppress(WorkflowContinuedAsNewError, WorkflowFailureError):
                await asyncio.wait_for(first.result(follow_runs=False), timeout=120)
            failed = [
                e.workflow_execution_failed_event_attributes.failure
                async for e in first.fetch_history_events()
                if e.HasField("workflow_execution_failed_event_attributes")
            ]
        finally:
            await handle.terminate("test over")
    assert len(failed) == 1, "a cron run of lw.Planner was not refused"
    assert failed[0].application_failure_info.type == INVALID_REQUEST, failed
    message = await opened_message(failed[0], client.data_converter.decode)
    assert "cron schedule" in message, failed
    assert not await asyncio.to_thread(ran, data_dir)
