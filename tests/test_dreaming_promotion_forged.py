"""Promotion carries out only what a dream proposed and a reviewer approved.

A rogue ``lw.Dreaming`` on the attacker's own task queue cannot call the dreaming
activities at all. One that runs where lw's activities serve it (a worker on the lw
queue is a worker) still cannot skip the human: ``promote`` takes no change list and
no approver, only the id of an ``approve`` update, and reads the decision the server
recorded for it; the proposal is the one ``propose`` saved first, so notes written
after it are not promoted, and the approver audited is the reviewer's."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.dreaming import Decision, PromotionOutcome
from lw_temporal.errors import INVALID_REQUEST, UNVERIFIED_CALLER
from lw_temporal.memory import StoreKind, StoreRef

from ._attack_support import Hit, _hit, attacker, strike
from .conftest import pydantic_client

NOTE = "/mnt/memory/workflow/consolidated.md"
LATE = "/mnt/memory/workflow/late.md"
FORGED_CHANGE = {"path": "evil.md", "base_sha256": None, "sha256": "0" * 64, "bytes": 4}


class Plan(BaseModel):
    forged_change: dict[str, Any]


_ONCE = RetryPolicy(maximum_attempts=1)


async def _call(name: str, args: dict[str, Any]) -> Hit:
    try:
        result = await workflow.execute_activity(
            name,
            args,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=_ONCE,
        )
        return Hit(ok=True, result=result)
    except ActivityError as err:
        return _hit(err)


@workflow.defn(name="lw.Dreaming", sandboxed=False)
class QueueRogueDream:
    """Its own dreaming code, on a queue lw's activities serve: it writes notes, asks
    for a proposal twice around a late note, promotes on its own twice, then promotes
    when a reviewer's approval arrives (once it is waiting)."""

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.waiting = False
        self.done = False

    @workflow.query(name="waiting")
    def is_waiting(self) -> bool:
        return self.waiting

    @workflow.signal(name="done")
    def finish(self) -> None:
        self.done = True

    @workflow.run
    async def run(self, plan: Plan) -> list[Hit]:
        self.hits.append(await _call("lw.memory.write", {"path": NOTE, "content": "lesson\n"}))
        self.hits.append(await _call("lw.dreaming.propose", {"batches": 0}))
        self.hits.append(await _call("lw.memory.write", {"path": LATE, "content": "unseen\n"}))
        self.hits.append(await _call("lw.dreaming.propose", {"batches": 0}))
        self.hits.append(await _call("lw.dreaming.promote", {"update_id": "made-up"}))
        old_shape = {"changes": [plan.forged_change], "decision": {"who": "carol"}}
        self.hits.append(await _call("lw.dreaming.promote", old_shape))
        self.waiting = True
        await workflow.wait_condition(lambda: self.done)
        return self.hits

    @workflow.update(name="approve")
    async def approve(self, decision: dict[str, Any]) -> dict[str, Any]:
        info = workflow.current_update_info()
        assert info is not None
        await workflow.wait_condition(lambda: self.waiting)
        hit = await _call("lw.dreaming.promote", {"update_id": info.id})
        return hit.model_dump(mode="json")


def _target(data_dir: Path, target: str) -> dict[str, bytes]:
    root = data_dir / "memory" / "workflows" / target
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_a_rogue_dream_on_another_queue_cannot_call_the_dreaming_activities(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = f"forged-{uuid.uuid4().hex[:6]}"
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)])
    client = pydantic_client(dev_env)
    async with (
        Worker(client, task_queue=task_queue, activities=list(plugin.activity_callables)),
        attacker(dev_env, task_queue) as evil,
    ):
        hits = await evil.run(
            "lw.Dreaming",
            f"dream_{target}@{uuid.uuid4().hex[:8]}",
            strike("lw.memory.write", path=NOTE, content="poison\n"),
            strike("lw.dreaming.propose", batches=0),
            strike("lw.dreaming.promote", update_id="made-up"),
            strike("lw.dreaming.show", max_bytes=1000),
        )
    assert [(h.ok, h.error_type) for h in hits] == [(False, UNVERIFIED_CALLER)] * 4, hits
    assert _target(data_dir, target) == {}
    assert not (data_dir / "memory" / "workflows" / "memory.dreaming" / target).exists()


async def test_a_dream_promotes_only_its_saved_proposal_and_only_on_a_reviewers_update(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = f"forged-{uuid.uuid4().hex[:6]}"
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id=target)])
    client = pydantic_client(dev_env)
    dream_id = f"dream_{target}@{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[QueueRogueDream],
        activities=list(plugin.activity_callables),
    ):
        handle = await client.start_workflow(
            "lw.Dreaming",
            Plan(forged_change=FORGED_CHANGE),
            id=dream_id,
            task_queue=task_queue,
            result_type=list[Hit],
        )
        answer: dict[str, Any] = await handle.execute_update(
            "approve", Decision(who="carol", why="read the diff"), result_type=dict
        )
        await handle.signal("done")
        hits = await handle.result()

    wrote, first, late, second, made_up, old_shape = hits
    assert wrote.ok and late.ok, (wrote, late)
    assert first.ok and second.ok
    # The second proposal is the first one: the late note is not in it.
    assert [c["path"] for c in first.result["changes"]] == ["consolidated.md"]
    assert second.result["changes"] == first.result["changes"]
    # Promoting without a reviewer's update is refused, and the old request shape (a
    # hand-made change list and approver) is not even read.
    assert (made_up.ok, made_up.error_type) == (False, INVALID_REQUEST), made_up
    assert "no approval 'made-up'" in made_up.message
    assert not old_shape.ok

    promoted = Hit.model_validate(answer)
    assert promoted.ok, promoted
    outcome = PromotionOutcome.model_validate(promoted.result)
    assert outcome.promoted == ("consolidated.md",) and outcome.conflicts == ()
    assert _target(data_dir, target) == {"consolidated.md": b"lesson\n"}
    audit = plugin.memory.audit(StoreRef(StoreKind.WORKFLOW, target))
    assert [(e.op, e.path, e.actor) for e in audit] == [("write", "consolidated.md", "carol")]
