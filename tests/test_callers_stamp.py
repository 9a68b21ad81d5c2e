"""An lw workflow's stamp spares its regular activities the describe of their run, and
vouches for nothing else: a client with namespace access that copies a real step's
stamp from its history into a run of its own under the same workflow ID, or makes one
with a key of its own, is refused as before (the stamp binds the run id; the key is
the workers')."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    Interceptor,
    StartActivityInput,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from lw_temporal import LittleWorkflowPlugin, Role, WorkflowDefinition
from lw_temporal._vouch import CALLER_HEADER
from lw_temporal.errors import UNVERIFIED_CALLER
from lw_temporal.testing import ScriptedModel, plugin_client, tool

from ._attack_support import ROGUES, Attacker, strike
from .conftest import pydantic_client

ALPHA = WorkflowDefinition(id="alpha")
SCRIPTS = ScriptedModel(
    {
        ("alpha", Role.PLANNER): [
            [tool("bash", command="echo plan > /mnt/scratch/own/plan.md")],
            [tool("run_step", task="read the plan")],
            [tool("finish", summary="planned")],
        ],
        ("alpha", Role.WORKER): [
            [tool("bash", command="cat /mnt/scratch/from-planner/plan.md")],
            [tool("finish", summary="worked")],
        ],
    }
)

#: What the attacker's workflows put in the lw-caller header (set by the test).
_STAMP: dict[str, Any] = {}


class _Stamping(Interceptor):
    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _StampingWorkflow


class _StampingWorkflow(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_StampingOutbound(outbound))


class _StampingOutbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        data = _STAMP.get("copied")
        if data is None:  # one of its own making, under a key it made up
            info = workflow.info()
            chain, parent, run = info.run_id, _STAMP["parent"], _STAMP["parent_run"]
            fields = [info.workflow_id, info.run_id, info.workflow_type, chain, parent, run]
            message = json.dumps(fields, separators=(",", ":")).encode()
            mac = hmac.new(secrets.token_bytes(32), message, hashlib.sha256).hexdigest()
            body = {"chain": chain, "parent": parent, "run": run, "mac": mac}
            data = json.dumps(body, separators=(",", ":")).encode()
        stamp = Payload(metadata={"encoding": b"binary/plain"}, data=data)
        input.headers = {**input.headers, CALLER_HEADER: stamp}
        return super().start_activity(input)


@asynccontextmanager
async def stamping_attacker(env: WorkflowEnvironment, target: str) -> AsyncIterator[Attacker]:
    client = pydantic_client(env)
    queue = f"evil-{uuid.uuid4().hex[:10]}"
    async with Worker(client, task_queue=queue, workflows=ROGUES, interceptors=[_Stamping()]):
        yield Attacker(client, queue, target)


async def _step_of(client: Client, planner: str) -> tuple[str, str]:
    """The planner's step: its workflow ID and run id, from the planner's history."""
    async for event in client.get_workflow_handle(planner).fetch_history_events():
        if event.HasField("child_workflow_execution_started_event_attributes"):
            execution = event.child_workflow_execution_started_event_attributes.workflow_execution
            return execution.workflow_id, execution.run_id
    raise AssertionError(f"{planner} started no step")


async def _bash_stamp(client: Client, workflow_id: str) -> bytes:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name == "lw.bash":
                return bytes(scheduled.header.fields[CALLER_HEADER].data)
    raise AssertionError(f"{workflow_id} ran no command")


async def test_a_stamped_tree_sends_no_describe_and_a_stamp_vouches_for_nothing_else(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [ALPHA], model=SCRIPTS)
    client = plugin_client(dev_env.client, plugin)
    planner = f"run_alpha@{task_queue}"
    async with Worker(client, task_queue=task_queue):
        await client.execute_workflow("lw.Planner", "plan", id=planner, task_queue=task_queue)
        # Every activity of the tree was confirmed without asking the server.
        assert plugin.config.callers.describes == 0
        step, _ = await _step_of(client, planner)
        copied = await _bash_stamp(client, step)
        assert json.loads(copied)["parent"] == planner

        planner_run = (await client.get_workflow_handle(planner).describe()).run_id
        async with stamping_attacker(dev_env, task_queue) as evil:
            read = strike("lw.bash", command="cat /mnt/scratch/from-planner/plan.md")
            _STAMP.clear()
            _STAMP["copied"] = copied  # the real step's stamp, under the step's own ID
            hits = await evil.run("lw.Worker", step, read)
            _STAMP.clear()
            _STAMP.update(parent=planner, parent_run=planner_run)  # a key of its own
            hits += await evil.run("lw.Worker", f"{planner}/steps/step_97", read)
    assert len(hits) == 2
    for hit in hits:
        assert (hit.ok, hit.error_type) == (False, UNVERIFIED_CALLER), hit
        assert "plan" not in str(hit.result)
