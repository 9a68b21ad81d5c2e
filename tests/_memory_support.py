"""Test workflows that run memory activities under a real role.

An activity's scope comes from its workflow's type and ID, so these stand-ins carry
the real type names (``lw.Planner`` ...) and are started with IDs of the grammar. They
execute a script of activity calls and report each outcome, so tests can check both
results and typed failures. The client is built without the plugin so that the
plugin's own workflows of the same names are not registered beside them. Each ID gets
one open run, started under its ancestors' runs (``_session_support``): the activities
act only for the run the server confirms as the one its ID names.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, Role
from lw_temporal.errors import NON_RETRYABLE
from lw_temporal.ids import parse_workflow_id
from tests._session_support import Sessions, StandIn
from tests.conftest import pydantic_client


class Call(BaseModel):
    activity: str
    args: dict[str, Any]


class Script(BaseModel):
    calls: list[Call]
    parallel: bool = False
    max_attempts: int = 3


class Outcome(BaseModel):
    ok: bool
    result: dict[str, Any] = Field(default_factory=dict)
    error_type: str | None = None
    message: str | None = None


async def _one(call: Call, max_attempts: int) -> Outcome:
    try:
        result = await workflow.execute_activity(
            call.activity,
            call.args,
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200),
                maximum_attempts=max_attempts,
                non_retryable_error_types=list(NON_RETRYABLE),
            ),
        )
        return Outcome(ok=True, result=result)
    except ActivityError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError):
            return Outcome(ok=False, error_type=cause.type, message=cause.message)
        return Outcome(ok=False, error_type=type(cause).__name__, message=str(cause))


async def _run(script: Script) -> list[Outcome]:
    if script.parallel:
        return list(await asyncio.gather(*(_one(c, script.max_attempts) for c in script.calls)))
    return [await _one(c, script.max_attempts) for c in script.calls]


RUN_SCRIPT = "script"


class _ScriptStandIn(StandIn):
    @workflow.update(name=RUN_SCRIPT)
    async def script(self, script: Script) -> list[Outcome]:
        return await self.calling(_run(script))


@workflow.defn(name="lw.Planner", sandboxed=False)
class ScriptPlanner(_ScriptStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="lw.Worker", sandboxed=False)
class ScriptWorker(_ScriptStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


@workflow.defn(name="lw.Orchestrator", sandboxed=False)
class ScriptOrchestrator(_ScriptStandIn):
    @workflow.run
    async def run(self) -> None:
        await self.wait()


WORKFLOW_FOR_ROLE = {
    "planner": ScriptPlanner,
    "worker": ScriptWorker,
    "orchestrator": ScriptOrchestrator,
}

RunScript = Callable[..., Awaitable[list[Outcome]]]


def call(activity: str, **args: Any) -> Call:
    return Call(activity=activity, args=args)


@asynccontextmanager
async def memory_harness(
    env: WorkflowEnvironment,
    plugin: LittleWorkflowPlugin,
    task_queue: str,
    *,
    with_activities: bool = True,
    extra_activities: Sequence[Callable[..., Any]] = (),
) -> AsyncIterator[RunScript]:
    """Yields ``run(workflow_id, *calls, role=..., parallel=False, max_attempts=3)``.
    Without ``with_activities`` this worker runs the workflows only, so the activities
    run on other workers (other processes) polling the same task queue."""
    client = pydantic_client(env)
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=list(WORKFLOW_FOR_ROLE.values()),
        activities=[
            *(plugin.memory_activities.callables if with_activities else ()),
            *extra_activities,
        ],
    ):
        sessions = Sessions(client, task_queue)

        async def run(
            workflow_id: str,
            *calls: Call,
            role: str = "planner",
            parallel: bool = False,
            max_attempts: int = 3,
        ) -> list[Outcome]:
            assert parse_workflow_id(workflow_id).role is Role(role), (workflow_id, role)
            outcomes: list[Outcome] = await sessions.call(
                workflow_id,
                RUN_SCRIPT,
                Script(calls=list(calls), parallel=parallel, max_attempts=max_attempts),
                list[Outcome],
            )
            return outcomes

        try:
            yield run
        finally:
            await sessions.close()
