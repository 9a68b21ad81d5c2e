"""A worker whose plugin has no model fails an agent's first turn with a typed error
that says what to configure, instead of leaving the run waiting forever."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import AgentInput, LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.errors import MODEL_NOT_CONFIGURED

from ._hierarchy_support import failure_type
from .conftest import plugin_client


async def test_no_model_is_a_clear_failure(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="alpha")])
    client = plugin_client(dev_env, plugin)
    async with Worker(client, task_queue=task_queue):
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(), id=f"run_alpha@{task_queue}", task_queue=task_queue
        )
        assert await failure_type(handle) == MODEL_NOT_CONFIGURED
