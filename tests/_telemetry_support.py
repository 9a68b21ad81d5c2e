"""The sample pipeline on the dev server, and what its histories say it did."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal._cli._demo_run import _seed_org_memory
from lw_temporal.ids import DataLayout
from workflows.pipeline import DEFINITIONS, sample_model

from ._privacy_support import opened, opened_one
from .conftest import plugin_client

TASK = "Review and score candidate Dana Reyes for job ABC-123."


@dataclass
class Scheduled:
    """One activity a workflow scheduled, with its summary and (decoded) result."""

    workflow_id: str
    activity_type: str
    summary: str | None
    arguments: Any = None
    result: Any = None


@dataclass
class PipelineRun:
    client: Client
    pipeline: str
    workflow_ids: list[str] = field(default_factory=list)
    activities: list[Scheduled] = field(default_factory=list)

    def of_type(self, activity_type: str) -> list[Scheduled]:
        return [a for a in self.activities if a.activity_type == activity_type]


async def _tree(client: Client, root: str) -> list[str]:
    ids, pending = [], [root]
    while pending:
        workflow_id = pending.pop(0)
        ids.append(workflow_id)
        result = await client.get_workflow_handle(workflow_id, result_type=AgentResult).result()
        pending += result.children
    return ids


async def history_activities(client: Client, workflow_id: str) -> list[Scheduled]:
    """Every activity (regular or local) ``workflow_id`` ran, from its history."""
    converter = client.data_converter.payload_converter
    found: dict[int, Scheduled] = {}
    out: list[Scheduled] = []
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    for event in history.events:
        summary = (
            converter.from_payload(await opened_one(client, event.user_metadata.summary), str)
            if event.HasField("user_metadata") and event.user_metadata.HasField("summary")
            else None
        )
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            args = converter.from_payloads(await opened(client, attrs.input.payloads), [dict])[0]
            item = Scheduled(workflow_id, attrs.activity_type.name, summary, args)
            found[event.event_id] = item
            out.append(item)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs_c = event.activity_task_completed_event_attributes
            if attrs_c.result.payloads:
                result = converter.from_payloads(
                    await opened(client, attrs_c.result.payloads), [dict]
                )[0]
                found[attrs_c.scheduled_event_id].result = result
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name != "core_local_activity":
                continue
            data = converter.from_payloads(marker.details["data"].payloads, [dict])[0]
            out.append(Scheduled(workflow_id, str(data.get("activity_type")), summary))
    return out


async def run_sample_pipeline(
    env: WorkflowEnvironment, data_dir: Path, task_queue: str, **plugin_options: Any
) -> PipelineRun:
    """Run the sample pipeline to its end on a worker configured with ``plugin_options``."""
    _seed_org_memory(DataLayout.at(data_dir))
    plugin = LittleWorkflowPlugin(data_dir, DEFINITIONS, model=sample_model(), **plugin_options)
    client = plugin_client(env, plugin)
    pipeline = f"pipeline_{secrets.token_hex(4)}"
    async with Worker(client, task_queue=task_queue):
        await client.execute_workflow(
            "lw.Orchestrator",
            AgentInput(task=TASK),
            id=pipeline,
            task_queue=task_queue,
            result_type=AgentResult,
        )
    run = PipelineRun(client, pipeline, await _tree(client, pipeline))
    for workflow_id in run.workflow_ids:
        run.activities += await history_activities(client, workflow_id)
    return run
