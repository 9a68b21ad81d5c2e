"""Retention runs as a scheduled workflow on a plugin worker: the Schedule's run
removes old scratch, keeps a running run's, and records itself in the audit log."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import (
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.ids import DataLayout, parse_workflow_id
from lw_temporal.memory import GcReport, schedule_retention

from ._cli_support import cli
from .conftest import plugin_client


async def test_scheduled_retention_removes_old_scratch_and_keeps_running_runs(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="gc")])
    client = plugin_client(dev_env, plugin)
    layout = DataLayout.at(data_dir)
    token = uuid.uuid4().hex[:8]
    old_id, running_id = f"run_gc@{token}-old", f"run_gc@{token}-running"
    running = await client.start_workflow(
        "lw.Planner", id=running_id, task_queue=f"{task_queue}-nobody"
    )
    old = (datetime.now(UTC) - timedelta(days=10)).timestamp()
    for workflow_id in (old_id, running_id):
        scratch = layout.scratch(parse_workflow_id(workflow_id))
        scratch.mkdir(parents=True)
        (scratch / "plan.md").write_text("plan\n")
        for path in (scratch / "plan.md", scratch):
            os.utime(path, (old, old))

    schedule_id = f"lw-retention-test-{token}"
    async with Worker(client, task_queue=task_queue):
        schedule = await schedule_retention(
            client,
            every=timedelta(days=1),
            retain=timedelta(days=7),
            task_queue=task_queue,
            schedule_id=schedule_id,
            trigger_immediately=True,
        )
        try:
            description = await schedule.describe()
            assert description.schedule.policy.overlap is ScheduleOverlapPolicy.SKIP
            assert isinstance(description.schedule.action, ScheduleActionStartWorkflow)
            assert description.schedule.action.workflow == "lw.ScratchRetention"

            async def started() -> str:
                while True:
                    actions = (await schedule.describe()).info.recent_actions
                    if actions:
                        action = actions[0].action
                        assert isinstance(action, ScheduleActionExecutionStartWorkflow)
                        return action.workflow_id
                    await asyncio.sleep(0.2)

            workflow_id = await asyncio.wait_for(started(), 120)
            report = await client.get_workflow_handle(workflow_id, result_type=GcReport).result()
        finally:
            await schedule.delete()
            await running.terminate()

    assert [i.workflow_id for i in report.removed] == [old_id]
    assert report.kept_running == 1
    assert not layout.scratch(parse_workflow_id(old_id)).exists()
    assert layout.scratch(parse_workflow_id(running_id)).is_dir()
    log = layout.state / "audit" / "retention.jsonl"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["workflow_id"], e["actor"]) for e in entries] == [
        (old_id, f"workflow:{workflow_id}")
    ]


async def test_cli_gc_schedule_every_creates_the_retention_schedule(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    code, out, err = await cli(
        dev_env,
        "gc",
        "--data-dir",
        str(data_dir),
        "--retain",
        "30d",
        "--schedule-every",
        "1d",
        "--task-queue",
        task_queue,
    )
    assert code == 0, err
    assert "schedule lw-scratch-retention: scratch retention 30 days" in out
    handle = dev_env.client.get_schedule_handle("lw-scratch-retention")
    try:
        description = await handle.describe()
        assert [i.every for i in description.schedule.spec.intervals] == [timedelta(days=1)]
        action = description.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert (action.workflow, action.task_queue) == ("lw.ScratchRetention", task_queue)
        assert description.schedule.policy.overlap is ScheduleOverlapPolicy.SKIP
    finally:
        await handle.delete()
