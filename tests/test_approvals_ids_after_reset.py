"""A run that starts over from earlier state never reuses a request id.

A workflow reset replays a run's history up to a point and goes on from there as a
new run of the same workflow ID: before the fix its next request was numbered from
the replayed book (``a1`` again), so a decision sent for the ``a1`` a reviewer saw
reached another request, and the new request's audit record replaced the one under
which a command had already run (``approved by carol`` became ``denied by dana``).
Ids carry a tag from the workflow's seeded randomness, which the server reseeds after
a reset point: the new run's request has an id of its own, the old id is refused on
it, and both records stay. A reset to a point after a decision replays that decision
onto the very request it decided (the ids before the reset point come out the same).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, ModelRequest, Role, ToolCall
from lw_temporal import WorkflowDefinition as Definition
from lw_temporal._approvals._client import ApprovalRefused, decide
from lw_temporal.ids import DataLayout
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._reset_support import pending as _pending
from ._reset_support import reset as _reset
from ._reset_support import task_ends


def _told(request: ModelRequest) -> list[ToolCall]:
    return [tool("finish", summary=" | ".join(r.text for r in request.last_results()))]


DEFINITIONS = [Definition(id="again", approvals=(ApprovalRule(tool="bash", command="deploy"),))]
DEPLOY = tool("bash", command="echo deploy >> /mnt/scratch/own/ran")
MODEL = ScriptedModel({("again", Role.PLANNER): [[DEPLOY], _told]})


def _records(data_dir: Path) -> dict[str, dict[str, object]]:
    found = sorted((DataLayout.at(data_dir).root / ".lw/approvals").rglob("*.json"))
    return {p.stem: json.loads(p.read_text())["record"] for p in found}


async def test_a_reset_run_opens_a_request_of_its_own(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    workflow_id = f"run_again@{task_queue}"
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=DEFINITIONS,
        model=MODEL,
        task_queue=task_queue,
    ) as client:
        handle = await client.start_workflow(
            "lw.Planner", "go", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        first = await _pending(client, workflow_id, handle.result_run_id or "")
        await decide(client, workflow_id, first.id, approve=True, by="carol", why="go")
        assert (await handle.result()).summary.startswith("exit code 0")
        events = (await handle.fetch_history()).events
        completed = task_ends(events)
        bash = next(
            e.event_id
            for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "lw.bash"
        )
        bash_done = next(
            e.event_id
            for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and e.activity_task_completed_event_attributes.scheduled_event_id == bash
        )

        # Back to before the request: the run asks again, under another id.
        run = await _reset(client, handle, completed[0])
        second = await _pending(client, workflow_id, run)
        assert second.id != first.id, (first.id, second.id)
        try:
            await decide(client, workflow_id, first.id, approve=True, by="carol")
        except ApprovalRefused as err:
            assert f"no approval request {first.id} in {workflow_id}" in str(err), err
        else:
            raise AssertionError("the earlier run's decision applied to the reset run")
        await decide(client, workflow_id, second.id, approve=False, by="dana", why="not again")
        await client.get_workflow_handle(workflow_id, run_id=run).result()
        records = _records(data_dir)
        assert (records[first.id]["outcome"], records[first.id]["by"]) == ("approved", "carol")
        assert (records[second.id]["outcome"], records[second.id]["by"]) == ("denied", "dana")

        # Back to after the decided command ran: the decision replays onto the request
        # it decided (a reset to before the command ran would run it again, as a reset
        # does every activity after its point).
        after = next(e for e in completed if e > bash_done)
        again = await _reset(client, handle, after)
        result = await asyncio.wait_for(
            client.get_workflow_handle(workflow_id, run_id=again, result_type=AgentResult).result(),
            60,
        )
    assert result.summary.startswith("exit code 0")
    ran = (DataLayout.at(data_dir).runs / workflow_id / "scratch/ran").read_text()
    assert ran == "deploy\n"  # approved once, run once; the denied request never ran
