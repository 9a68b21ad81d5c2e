"""A dream counts a planner under a pipeline's ID only if that pipeline started it: a
client with namespace write access that starts ``lw.Planner`` itself under
``pipeline_<victim>/sub-runs/run_<target>@<token>``, with the victim pipeline's sealed
input copied from its history, gets a run that fails at its start (no parent), and the
target's dream neither counts it nor reads the victim's task out of it. Before, the
dream counted a run that never passed a caller check if it had run on a queue the
dream's worker serves, and read its history under its ID's tree, the victim's."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role, WorkflowDefinition
from lw_temporal.dreaming import DreamInput
from lw_temporal.testing import ScriptedModel, tool

from ._dreaming_support import read_records
from ._hierarchy_support import lw_worker

PLANTED = "Quintavalle-4417 salary review"
MODEL = ScriptedModel(
    {
        (None, Role.ORCHESTRATOR): [[tool("finish", summary="done")]],
        ("public", Role.PLANNER): [[tool("finish", summary="done")]],
    }
)


async def _start_input(client: Client, workflow_id: str) -> Payload:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            [payload] = event.workflow_execution_started_event_attributes.input.payloads
            return payload
    raise AssertionError(f"{workflow_id} has no start event")


async def _listed_as(client: Client, workflow_id: str, status: str) -> None:
    query = f"WorkflowId = '{workflow_id}' AND ExecutionStatus = '{status}'"
    for _ in range(300):
        if [w async for w in client.list_workflows(query)]:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id} never listed as {status}")


async def test_a_forged_subrun_with_the_pipelines_input_is_not_dreamt_of(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definitions = [WorkflowDefinition(id="public")]
    pipeline = f"pipeline_{task_queue}"
    forged = f"{pipeline}/sub-runs/run_public@evil"
    async with lw_worker(dev_env, data_dir, task_queue, definitions, MODEL) as client:
        await client.execute_workflow(
            "lw.Orchestrator", AgentInput(task=PLANTED), id=pipeline, task_queue=task_queue
        )
        copied = await _start_input(dev_env.client, pipeline)
        handle = await dev_env.client.start_workflow(
            "lw.Planner", RawValue(copied), id=forged, task_queue=task_queue
        )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(handle.result(), 60)
        assert (await handle.describe()).status is WorkflowExecutionStatus.FAILED
        await _listed_as(dev_env.client, forged, "Failed")
        dream = await client.start_workflow(
            "lw.Dreaming", DreamInput(target="public"), id=f"dream_public@{task_queue}",
            task_queue=task_queue,
        )  # fmt: skip
        with contextlib.suppress(Exception):
            await asyncio.wait_for(dream.result(), 90)
        records = read_records(data_dir, dream.id)
    assert all(PLANTED not in r.model_dump_json() for r in records), records
    assert forged not in {r.workflow_id for r in records}, records
