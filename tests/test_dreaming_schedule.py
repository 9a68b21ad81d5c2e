"""After real sample-pipeline runs, a Schedule-started dream is the dreaming agent
(the sample model's bash commands) writing notes to its own store only; ``lw-temporal
dream show`` prints a unified diff, ``approve --only`` promotes part with the approver in
the audit log; later dreams read only new runs, two proposals wait at once and are
decided independently, and ``reject`` leaves the target untouched."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin
from lw_temporal._cli._demo_run import run_pipeline
from lw_temporal.dreaming import DreamOptions, DreamResult, DreamStatus, schedule_dreaming
from lw_temporal.ids import DataLayout
from lw_temporal.memory import StoreKind, StoreRef
from workflows.pipeline import DEFINITIONS, sample_model

from ._cli_support import cli
from ._dreaming_support import wait_for_status
from .conftest import plugin_client

TARGET = "candidate-review"


async def next_dream(client: Client, schedule_id: str, seen: set[str]) -> str:
    """The ID of the newest workflow the Schedule started that is not in ``seen``."""

    async def poll() -> str:
        while True:
            description = await client.get_schedule_handle(schedule_id).describe()
            for recent in description.info.recent_actions:
                action = recent.action
                assert isinstance(action, ScheduleActionExecutionStartWorkflow)
                workflow_id = action.workflow_id
                if workflow_id not in seen:
                    seen.add(workflow_id)
                    return workflow_id
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), 120)


def snapshot(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def outside_own_store(layout: DataLayout) -> dict[str, bytes]:
    """Every memory file but dreaming's own store's."""
    return {
        path: data
        for path, data in snapshot(layout.memory).items()
        if not path.startswith("workflows/memory.dreaming/")
    }


async def test_scheduled_dream_then_cli_show_approve_and_reject(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LW_DATA_DIR", str(data_dir))  # the CLI opens payloads with its keys
    layout = DataLayout.at(data_dir)
    plugin = LittleWorkflowPlugin(data_dir, DEFINITIONS, model=sample_model())
    client = plugin_client(dev_env, plugin)
    target_root = layout.workflow_memory(TARGET)
    own = StoreRef(StoreKind.DREAMING, TARGET)
    target = StoreRef(StoreKind.WORKFLOW, TARGET)
    schedule_id = f"lw-dream-test-{uuid.uuid4().hex[:8]}"
    quiet = lambda line: None  # noqa: E731
    seen: set[str] = set()
    async with Worker(client, task_queue=task_queue):
        for _ in range(2):
            await run_pipeline(client, layout, quiet, task_queue=task_queue)
        before = snapshot(target_root)
        others_before = outside_own_store(layout)
        schedule = await schedule_dreaming(
            client,
            TARGET,
            every=timedelta(hours=12),
            task_queue=task_queue,
            options=DreamOptions(approval_timeout=timedelta(minutes=10)),
            schedule_id=schedule_id,
            trigger_immediately=True,
        )
        try:
            description = await schedule.describe()
            assert description.schedule.policy.overlap is ScheduleOverlapPolicy.ALLOW_ALL
            assert isinstance(description.schedule.action, ScheduleActionStartWorkflow)
            assert description.schedule.action.workflow == "lw.Dreaming"

            first_id = await next_dream(client, schedule_id, seen)
            assert first_id.startswith(f"dream_{TARGET}@scheduled-")
            first = client.get_workflow_handle(first_id, result_type=DreamResult)
            state = await wait_for_status(first, DreamStatus.AWAITING_APPROVAL)
            assert state.runs == 2 and state.agent, "the dreaming agent wrote the notes"
            assert sorted(c.path for c in state.changes) == ["consolidated.md", "failures.md"]
            assert snapshot(target_root) == before, "the dream did not write the target"
            assert outside_own_store(layout) == others_before, "nor any other store"
            writers = {(e.workflow_id, e.activity_type) for e in plugin.memory.audit(own)}
            assert writers == {(first_id, "lw.bash")}, "its own commands wrote its notes"
            note = plugin.memory.read(own, "consolidated.md").content
            assert "Lessons consolidated from 2 runs" in note
            for run in state.changes[0].sources:
                assert run in note, "the note cites the runs it came from"

            for _ in range(60):  # visibility may lag a moment behind the start
                code, out, err = await cli(dev_env, "dream", "list", "--task-queue", task_queue)
                assert code == 0, err
                if first_id in out:
                    break
                await asyncio.sleep(0.5)
            assert f"{first_id}  awaiting-approval  target={TARGET}" in out

            code, out, err = await cli(
                dev_env, "dream", "show", first_id, "--task-queue", task_queue
            )
            assert code == 0, out + err
            assert f"--- /dev/null\n+++ b/{TARGET}/consolidated.md\n" in out
            assert "+# Lessons consolidated from 2 runs" in out
            assert f"# {TARGET}/failures.md: from runs " in out

            code, out, err = await cli(
                dev_env, "dream", "approve", first_id, "--only", "consolidated.md",
                "--by", "carol", "--why", "useful",
            )  # fmt: skip
            assert code == 0, out + err
            assert "promoted consolidated.md (approved by carol)" in out
            assert "dropped failures.md" in out
            result = await first.result()
            assert result.status is DreamStatus.APPROVED
            assert (target_root / "consolidated.md").read_text() == note
            assert not (target_root / "failures.md").exists()
            assert "<!--" not in note and "lw-dreaming-state" not in note
            entries = plugin.memory.audit(target, path="consolidated.md")
            assert [e.actor for e in entries] == ["carol"]
            assert entries[0].workflow_id == first_id

            # Two more runs, a dream after each: both proposals wait at once, each
            # with only its own run, and are decided independently.
            pending: list[str] = []
            for _ in range(2):
                await run_pipeline(client, layout, quiet, task_queue=task_queue)
                await schedule.trigger()
                pending.append(await next_dream(client, schedule_id, seen))
            after_approval = snapshot(target_root)
            states = [
                await wait_for_status(
                    client.get_workflow_handle(w, result_type=DreamResult),
                    DreamStatus.AWAITING_APPROVAL,
                )
                for w in pending
            ]
            assert [s.runs for s in states] == [1, 1]
            assert set(states[0].changes[0].sources).isdisjoint(states[1].changes[0].sources)
            code, out, err = await cli(
                dev_env, "dream", "reject", pending[0], "--by", "dave", "--why", "noise"
            )
            assert code == 0, out + err
            done = client.get_workflow_handle(pending[0], result_type=DreamResult)
            assert (await done.result()).status is DreamStatus.REJECTED
            assert snapshot(target_root) == after_approval, "a rejection changes nothing"
            waiting = await wait_for_status(
                client.get_workflow_handle(pending[1]), DreamStatus.AWAITING_APPROVAL
            )
            assert waiting.runs == 1, "the other proposal still waits"
            code, out, err = await cli(
                dev_env, "dream", "approve", pending[1], "--by", "erin", "--why", "ok"
            )
            assert code == 0, out + err
            assert "promoted consolidated.md (approved by erin)" in out
            entries = plugin.memory.audit(target, path="consolidated.md")
            assert [e.actor for e in entries] == ["carol", "erin"]
        finally:
            await schedule.delete()


async def test_cli_dream_schedule_creates_an_allow_all_schedule(
    dev_env: WorkflowEnvironment, task_queue: str
) -> None:
    schedule_id = f"lw-dream-cli-{uuid.uuid4().hex[:8]}"
    code, out, err = await cli(
        dev_env,
        "dream",
        "schedule",
        TARGET,
        "--every",
        "6h",
        "--task-queue",
        task_queue,
        "--schedule-id",
        schedule_id,
        # The shared dev server knows other tests' definitions, so the check of the
        # name against indexed runs would depend on which tests ran first.
        "--force",
    )
    assert code == 0, out + err
    handle = dev_env.client.get_schedule_handle(schedule_id)
    try:
        description = await handle.describe()
        assert description.schedule.policy.overlap is ScheduleOverlapPolicy.ALLOW_ALL
        assert [i.every for i in description.schedule.spec.intervals] == [timedelta(hours=6)]
        action = description.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert action.workflow == "lw.Dreaming"
        assert action.id == f"dream_{TARGET}@scheduled"
        assert action.task_queue == task_queue
    finally:
        await handle.delete()

    code, out, err = await cli(dev_env, "dream", "schedule", "Not_An_Id", "--every", "1h")
    assert code != 0 and "definition id 'Not_An_Id' is not valid" in err
