"""The one shape of Schedule the library creates: start a workflow every interval
(by default skipping a start while the previous one still runs), created or brought up
to date by the same call."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
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
    """Create the Schedule ``schedule_id``, or give the existing one this action,
    interval and policy (its paused state and notes kept), so running it twice is the
    same as once; ``trigger_immediately`` starts one workflow now either way. Temporal
    appends the start time to ``workflow_id`` for each workflow it starts."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(workflow, arg, id=workflow_id, task_queue=task_queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        policy=SchedulePolicy(overlap=overlap),
    )
    try:
        return await client.create_schedule(
            schedule_id, schedule, trigger_immediately=trigger_immediately
        )
    except ScheduleAlreadyRunningError:
        pass

    def updated(current: ScheduleUpdateInput) -> ScheduleUpdate:
        schedule.state = current.description.schedule.state
        return ScheduleUpdate(schedule=schedule)

    handle = client.get_schedule_handle(schedule_id)
    await handle.update(updated)
    if trigger_immediately:
        await handle.trigger(overlap=overlap)
    return handle
