"""A pinned host that goes away and does not come back within ``host_timeout`` fails
the sub-run waiting on it, with a message naming the host and the run; its parent
sees a failed child and goes on; nothing waits forever."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from ._hosts_support import (
    GO_SIGNAL,
    Forcing,
    host_workers,
    planner_id,
    step_id,
    two_hosts,
    workflow_worker,
)
from .conftest import pydantic_client


async def test_a_lost_host_fails_the_sub_run_naming_host_and_run(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    a, b = two_hosts(tmp_path, task_queue)
    client = pydantic_client(dev_env)
    async with workflow_worker(client, task_queue, a):
        async with host_workers(client, b):
            handle = await client.start_workflow(
                "lw.Planner",
                Forcing(planner_queue=b.queue, step_pin=b.pin(host_timeout=2), wait_for_go=True),
                id=planner_id(task_queue),
                task_queue=task_queue,
                result_type=str,
            )
            # Wait until the planner's command has completed: host b then holds its
            # scratch and has nothing in flight.
            for _ in range(600):
                history = await handle.fetch_history()
                if any(
                    e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                    for e in history.events
                ):
                    break
                await asyncio.sleep(0.05)
            plan = tmp_path / "runs-b/runs" / planner_id(task_queue) / "scratch/plan.md"
            assert plan.read_text() == "the plan\n"
        # Host b is gone (its worker stopped between activities); the step is pinned to it.
        await handle.signal(GO_SIGNAL)
        outcome = await asyncio.wait_for(handle.result(), timeout=60)
    assert outcome.startswith("failed: LwHostLost: "), outcome
    assert f"workflow {step_id(task_queue)!r}" in outcome
    assert "host 'b'" in outcome and b.queue in outcome and "within 2s" in outcome
