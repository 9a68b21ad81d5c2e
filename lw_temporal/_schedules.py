"""The one shape of Schedule the library creates: start a workflow every interval
(by default skipping a start while the previous one still runs)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)


async def create_interval_schedule(
    client: Client,
    schedule_id: str,
    *,
    workflow: str,
    arg: object,
    workflow_id: str,
    task_queue: str,
    every: timedelta,
    trigger_immediately: bool = False,
    overlap: ScheduleOverlapPolicy = ScheduleOverlapPolicy.SKIP,
) -> ScheduleHandle:
    """Create the Schedule ``schedule_id``; Temporal appends the start time to
    ``workflow_id`` for each workflow it starts."""
    return await client.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                workflow, arg, id=workflow_id, task_queue=task_queue
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
            policy=SchedulePolicy(overlap=overlap),
        ),
        trigger_immediately=trigger_immediately,
    )
