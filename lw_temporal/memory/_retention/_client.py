"""The Schedule that runs retention."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, ScheduleHandle

from ..._schedules import create_interval_schedule
from ._records import RETENTION_SCHEDULE_ID, RETENTION_WORKFLOW, RetentionPolicy


async def schedule_retention(
    client: Client,
    *,
    every: timedelta,
    retain: timedelta,
    task_queue: str,
    schedule_id: str = RETENTION_SCHEDULE_ID,
    trigger_immediately: bool = False,
) -> ScheduleHandle:
    """Create the Schedule that removes scratch older than ``retain`` every ``every``.

    The workers of ``task_queue`` must share the data dir whose scratch is cleaned.
    """
    if every <= timedelta(0) or retain <= timedelta(0):
        raise ValueError("retention interval and period must be positive")
    return await create_interval_schedule(
        client,
        schedule_id,
        workflow=RETENTION_WORKFLOW,
        arg=RetentionPolicy(retain=retain),
        workflow_id=schedule_id,
        task_queue=task_queue,
        every=every,
        trigger_immediately=trigger_immediately,
    )
