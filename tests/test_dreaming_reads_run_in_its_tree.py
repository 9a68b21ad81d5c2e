"""A dream reads each run's history bound to that run's tree: a forged run of the
dream's target, started by a client with namespace write access with another tree's
sealed input copied from that tree's history, is read with nothing of the other tree
in its record. Before, extraction decoded histories with no workflow context, so the
codec opened any tree's payload and the other tree's task became the forged run's task
in the target's dream (its notes and proposals)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import RawValue
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import AgentInput, LittleWorkflowPlugin, Role, WorkflowDefinition
from lw_temporal.dreaming._history import extract_run
from lw_temporal.testing import ScriptedModel, tool

from .conftest import plugin_client

PLANTED = "Quintavalle-4417 salary review"
MODEL = ScriptedModel(
    {
        ("secret", Role.PLANNER): [[tool("finish", summary="done")]],
        ("public", Role.PLANNER): [[tool("finish", summary="done")]],
    }
)


async def _start_input(client: Client, workflow_id: str) -> Payload:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            [payload] = event.workflow_execution_started_event_attributes.input.payloads
            return payload
    raise AssertionError(f"{workflow_id} has no start event")


async def test_a_forged_run_with_another_trees_input_tells_the_dream_nothing(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    definitions = [WorkflowDefinition(id="secret"), WorkflowDefinition(id="public")]
    plugin = LittleWorkflowPlugin(tmp_path / "data", definitions, model=MODEL)
    client = plugin_client(dev_env, plugin)
    victim, forged = f"run_secret@{task_queue}", f"run_public@{task_queue}-copy"
    async with Worker(client, task_queue=task_queue):
        await client.execute_workflow(
            "lw.Planner", AgentInput(task=PLANTED), id=victim, task_queue=task_queue
        )
        copied = await _start_input(dev_env.client, victim)
        handle = await dev_env.client.start_workflow(
            "lw.Planner", RawValue(copied), id=forged, task_queue=task_queue,
            execution_timeout=timedelta(seconds=3),
        )  # fmt: skip
        try:
            for _ in range(100):
                status = (await handle.describe()).status
                if status is not WorkflowExecutionStatus.RUNNING:
                    break
                await asyncio.sleep(0.2)
        finally:
            with contextlib.suppress(RPCError):
                await handle.terminate("test over")
        description = await handle.describe()
        status_name = description.status.name if description.status else "UNKNOWN"
        record = await extract_run(
            client, forged, description.run_id or "", status_name, description.close_time
        )
        mine = await extract_run(client, victim, "", "COMPLETED", None)
    assert mine.task == PLANTED  # its own tree's run reads as before
    assert PLANTED not in record.model_dump_json(), record
