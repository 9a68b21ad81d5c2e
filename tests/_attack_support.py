"""A client-side attacker: namespace access, a worker of its own on a task queue of its
own, and workflows *named* like lw's (``lw.Worker``, ``lw.Planner``, ``lw.Dreaming``...)
that schedule the real lw activities on the lw task queue, where the real lw worker
picks them up. Each strike's outcome is reported, so a test checks both what the lw
worker answered and, on the host, that nothing changed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.conftest import pydantic_client


class Strike(BaseModel):
    """One activity scheduled on ``queue`` (the lw worker's); ``args`` None sends none."""

    activity: str
    args: dict[str, Any] | None = None


class Child(BaseModel):
    """A child the rogue starts (e.g. the real ``lw.Worker`` on the lw queue)."""

    workflow_type: str
    workflow_id: str
    queue: str
    input: dict[str, Any] = Field(default_factory=dict)


class Handover(BaseModel):
    """A continue-as-new into another workflow type and queue (the real lw one)."""

    workflow_type: str
    queue: str
    input: dict[str, Any] = Field(default_factory=dict)


class Attack(BaseModel):
    queue: str
    strikes: list[Strike] = Field(default_factory=list)
    child: Child | None = None
    handover: Handover | None = None


class Hit(BaseModel):
    ok: bool
    error_type: str | None = None
    message: str = ""
    result: Any = None


def _hit(err: BaseException) -> Hit:
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.__cause__
    if cause is None:
        return Hit(ok=False, error_type=type(err).__name__, message=str(err))
    return Hit(ok=False, error_type=cause.type, message=cause.message)


async def _attack(attack: Attack) -> list[Hit]:
    hits: list[Hit] = []
    for strike in attack.strikes:
        try:
            result = await workflow.execute_activity(
                strike.activity,
                args=[] if strike.args is None else [strike.args],
                task_queue=attack.queue,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=dict,
            )
            hits.append(Hit(ok=True, result=result))
        except ActivityError as err:
            hits.append(_hit(err))
    if attack.child is not None:
        try:
            result = await workflow.execute_child_workflow(
                attack.child.workflow_type,
                attack.child.input,
                id=attack.child.workflow_id,
                task_queue=attack.child.queue,
                result_type=dict,
                execution_timeout=timedelta(minutes=2),
            )
            hits.append(Hit(ok=True, result=result))
        except ChildWorkflowError as err:
            hits.append(_hit(err))
    if attack.handover is not None:
        workflow.continue_as_new(
            workflow=attack.handover.workflow_type,
            args=[attack.handover.input],
            task_queue=attack.handover.queue,
        )
    return hits


@workflow.defn(name="lw.Worker", sandboxed=False)
class RogueWorker:
    @workflow.run
    async def run(self, attack: Attack) -> list[Hit]:
        return await _attack(attack)


@workflow.defn(name="lw.Planner", sandboxed=False)
class RoguePlanner:
    @workflow.run
    async def run(self, attack: Attack) -> list[Hit]:
        return await _attack(attack)


@workflow.defn(name="lw.Orchestrator", sandboxed=False)
class RogueOrchestrator:
    @workflow.run
    async def run(self, attack: Attack) -> list[Hit]:
        return await _attack(attack)


@workflow.defn(name="lw.Dreaming", sandboxed=False)
class RogueDreaming:
    @workflow.run
    async def run(self, attack: Attack) -> list[Hit]:
        return await _attack(attack)


@workflow.defn(name="lw.ScratchRetention", sandboxed=False)
class RogueRetention:
    @workflow.run
    async def run(self, attack: Attack) -> list[Hit]:
        return await _attack(attack)


ROGUES = [RogueWorker, RoguePlanner, RogueOrchestrator, RogueDreaming, RogueRetention]


class Attacker:
    """Starts rogue runs on its own queue; their strikes go to ``target_queue``."""

    def __init__(self, client: Client, queue: str, target_queue: str) -> None:
        self.client = client
        self.queue = queue
        self.target_queue = target_queue

    async def run(
        self,
        workflow_type: str,
        workflow_id: str,
        *strikes: Strike,
        child: Child | None = None,
        handover: Handover | None = None,
    ) -> list[Hit]:
        hits: list[Hit] = await self.client.execute_workflow(
            workflow_type,
            Attack(queue=self.target_queue, strikes=list(strikes), child=child, handover=handover),
            id=workflow_id,
            task_queue=self.queue,
            result_type=list[Hit],
            execution_timeout=timedelta(minutes=3),
        )
        return hits


@asynccontextmanager
async def attacker(env: WorkflowEnvironment, target_queue: str) -> AsyncIterator[Attacker]:
    """A client without lw's plugin and a worker of its own on a queue of its own."""
    client = pydantic_client(env)
    queue = f"evil-{uuid.uuid4().hex[:10]}"
    async with Worker(client, task_queue=queue, workflows=ROGUES):
        yield Attacker(client, queue, target_queue)


def strike(activity: str, **args: Any) -> Strike:
    return Strike(activity=activity, args=args)


async def start_rogue(
    attacker: Attacker, workflow_type: str, workflow_id: str, *, handover: Handover
) -> None:
    """Start a rogue run that continues as new into ``handover`` (its result is the
    real workflow's, read with a handle)."""
    await attacker.client.start_workflow(
        workflow_type,
        Attack(queue=attacker.target_queue, handover=handover),
        id=workflow_id,
        task_queue=attacker.queue,
        execution_timeout=timedelta(minutes=3),
    )
