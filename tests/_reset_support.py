"""Resetting a run in tests: wait for its pending approval request, reset it to the end
of a workflow task."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHandle

from lw_temporal import AgentResult
from lw_temporal._approvals import ApprovalRequest
from lw_temporal._approvals._client import list_approvals


async def pending(client: Client, workflow_id: str, run_id: str) -> ApprovalRequest:
    for _ in range(600):
        listing = await list_approvals(client, workflow_id=workflow_id)
        progress = await client.get_workflow_handle(workflow_id).describe()
        if listing.pending and progress.run_id == run_id:
            [request] = listing.pending
            return request
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} of {workflow_id} never had a pending request")


async def reset(client: Client, handle: WorkflowHandle[object, AgentResult], after: int) -> str:
    """Reset the run to the end of the workflow task that ended at event ``after``."""
    response = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(
                workflow_id=handle.id, run_id=handle.result_run_id or ""
            ),
            reason="test",
            workflow_task_finish_event_id=after,
            request_id=str(uuid.uuid4()),
        )
    )
    return response.run_id


def task_ends(events: Sequence[HistoryEvent]) -> list[int]:
    """The event ids of a history's completed workflow tasks (the points a reset goes to)."""
    return [
        e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]


def after_activities(events: Sequence[HistoryEvent], activity_type: str) -> list[int]:
    """For each completed activity of ``activity_type``, in order, the first completed
    workflow task after it: a reset there keeps that activity's result and runs the
    workflow on from it."""
    scheduled = {
        e.event_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    }
    points: list[int] = []
    waiting = False
    for e in events:
        if (
            e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and e.activity_task_completed_event_attributes.scheduled_event_id in scheduled
        ):
            waiting = True
        elif waiting and e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            points.append(e.event_id)
            waiting = False
    return points
