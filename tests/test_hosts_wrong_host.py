"""A step forced onto a host that does not hold its planner's scratch fails at its
first activity, once, with the message naming the supported topologies, instead of
running against an empty ``/mnt/scratch/from-planner/``."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from lw_temporal.ids import parse_workflow_id

from ._hosts_support import (
    Forcing,
    host_workers,
    planner_id,
    step_id,
    two_hosts,
    workflow_worker,
)
from .conftest import pydantic_client


async def test_a_step_on_the_wrong_host_fails_with_the_topology_message(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    a, b = two_hosts(tmp_path, task_queue)
    client = pydantic_client(dev_env)
    async with workflow_worker(client, task_queue, a), host_workers(client, a, b):
        outcome = await client.execute_workflow(
            "lw.Planner",
            Forcing(planner_queue=a.queue, step_pin=b.pin()),
            id=planner_id(task_queue),
            task_queue=task_queue,
            result_type=str,
        )
    assert outcome.startswith("failed: LwWrongTopology: "), outcome
    assert f"workflow {step_id(task_queue)!r}" in outcome
    assert "does not hold the run's scratch" in outcome and "lives on host 'a'" in outcome
    assert "shared volume" in outcome and "pinned runs" in outcome and "--host" in outcome

    # The planner's scratch and marker are on host a; host b ran nothing of the run.
    layout_a = a.plugin.config.layout
    layout_b = b.plugin.config.layout
    planner = layout_a.runs / planner_id(task_queue)
    assert (planner / "scratch/plan.md").read_text() == "the plan\n"
    marker = layout_a.run_marker(parse_workflow_id(planner_id(task_queue)))
    assert json.loads(marker.read_text())["host"] == "a"
    assert not (layout_b.runs / planner_id(task_queue)).exists()

    # Non-retryable: the step's command was attempted once.
    history = await client.get_workflow_handle(step_id(task_queue)).fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert set(attempts) == {1}
