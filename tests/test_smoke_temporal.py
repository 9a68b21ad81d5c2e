"""A workflow runs through the plugin on both real Temporal servers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition

from .conftest import plugin_client


class Echo(BaseModel):
    text: str
    count: int


@workflow.defn(name="test.Echo")
class EchoWorkflow:
    @workflow.run
    async def run(self, value: Echo) -> Echo:
        await workflow.sleep(timedelta(seconds=1))
        return Echo(text=value.text * value.count, count=1)


async def _roundtrip(env: WorkflowEnvironment, data_dir: Path, task_queue: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="smoke")])
    client = plugin_client(env, plugin)
    async with Worker(client, task_queue=task_queue, workflows=[EchoWorkflow]):
        result = await client.execute_workflow(
            EchoWorkflow.run,
            Echo(text="ab", count=2),
            id=f"smoke-{task_queue}",
            task_queue=task_queue,
        )
    assert result == Echo(text="abab", count=1)


async def test_dev_server_runs_a_workflow_through_the_plugin(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    await _roundtrip(dev_env, data_dir, task_queue)


async def test_time_skipping_server_runs_a_workflow_through_the_plugin(
    ts_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    await _roundtrip(ts_env, data_dir, task_queue)
