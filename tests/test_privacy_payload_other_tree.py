"""A sealed payload opens only in the run tree whose key sealed it: a client with
namespace write access (and no keys) that copies tree A's sealed start input from A's
history into a run of tree B, which it starts itself, gets nothing: B's worker refuses
the payload as one of another tree (``PayloadSealed``, naming both trees) and B's agent
never reads A's task. Before, decode opened any payload whose key the worker held, so
B's model was handed A's task."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import (
    AgentInput,
    LittleWorkflowPlugin,
    ModelRequest,
    Role,
    ToolCall,
    WorkflowDefinition,
)
from lw_temporal._privacy import EncryptionCodec, KeyRing, PayloadSealed, sealed_by
from lw_temporal._privacy._keys import FileKeyStore
from lw_temporal.testing import ScriptedModel, tool

from .conftest import plugin_client

PLANTED = "Quintavalle-4417 salary review"
SECRET = WorkflowDefinition(id="secret")
PUBLIC = WorkflowDefinition(id="public")
SEEN: list[str] = []


def _saw(request: ModelRequest) -> list[ToolCall]:
    SEEN.append(request.task)
    return [tool("finish", summary="done")]


MODEL = ScriptedModel({("secret", Role.PLANNER): [_saw], ("public", Role.PLANNER): [_saw]})


async def _start_input(client: Client, workflow_id: str) -> Payload:
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            [payload] = event.workflow_execution_started_event_attributes.input.payloads
            return payload
    raise AssertionError(f"{workflow_id} has no start event")


async def _task_failure(client: Client, workflow_id: str) -> str:
    """The first workflow task failure's message ("" when the run completed)."""
    for _ in range(150):
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event.workflow_task_failed_event_attributes.failure.message
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                return ""
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id}'s workflow task never failed")


async def test_another_trees_sealed_input_does_not_open_in_a_forged_run(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    SEEN.clear()
    plugin = LittleWorkflowPlugin(tmp_path / "data", [SECRET, PUBLIC], model=MODEL)
    client = plugin_client(dev_env, plugin)
    victim = f"run_secret@{task_queue}"
    forged = f"run_public@{task_queue}-copy"
    async with Worker(client, task_queue=task_queue):
        await client.execute_workflow(
            "lw.Planner", AgentInput(task=PLANTED), id=victim, task_queue=task_queue
        )
        assert SEEN == [PLANTED]
        copied = await _start_input(dev_env.client, victim)
        assert sealed_by(copied) == victim  # what any reader of the history sees
        # The attacker: a plain client with no keys, starting tree B with A's payload.
        handle = await dev_env.client.start_workflow(
            "lw.Planner", RawValue(copied), id=forged, task_queue=task_queue
        )
        try:
            message = await _task_failure(dev_env.client, forged)
        finally:
            with contextlib.suppress(RPCError):  # still failing its task: end it
                await handle.terminate("test over")
    assert SEEN == [PLANTED], "tree B's agent was given tree A's task"
    assert victim in message and forged in message, message
    assert "another run tree" in message, message


async def test_codec_bound_to_a_tree_opens_its_own_and_shared_payloads_only(
    tmp_path: Path,
) -> None:
    codec = EncryptionCodec(KeyRing(FileKeyStore(str(tmp_path / "keys"))))
    plain = [Payload(metadata={"encoding": b"json/plain"}, data=b'"x"')]
    own = codec.for_tree("run_a@one/steps/step_1")
    [mine] = await own.encode(plain)
    [shared] = await codec.encode(plain)  # no workflow: the shared key (UI, CLI)
    [other] = await codec.for_tree("run_b@two").encode(plain)
    assert await own.decode([mine, shared]) == plain * 2
    assert await codec.decode([mine, shared, other]) == plain * 3  # context-free readers
    with pytest.raises(PayloadSealed, match="another run tree"):
        await own.decode([other])
    # A Schedule's runs get "-<RFC 3339 time>" after the ID their input was sealed for.
    base = f"dream_alpha@scheduled-{uuid.uuid4().hex[:6]}"
    [scheduled] = await codec.for_tree(base).encode(plain)
    run = codec.for_tree(f"{base}-2026-12-03T10:00:00Z")
    assert await run.decode([scheduled]) == plain
    with pytest.raises(PayloadSealed, match="another run tree"):
        await codec.for_tree(f"{base}x-2026-12-03T10:00:00Z").decode([scheduled])
    with pytest.raises(PayloadSealed, match="another run tree"):
        await codec.for_tree(base).decode([await run.encode(plain)][0])
