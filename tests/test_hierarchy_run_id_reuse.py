"""A workflow ID names one run: its scratch belongs to the run chain that first used
it (continue-as-new keeps it), and another run started under the same ID, whatever ID
reuse policy its client chose, is refused at its first activity with
``LwWorkflowIdTaken`` naming the ID, before it reads or writes anything or starts a
child; a dream counts the first run once and the refused one not at all."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.testing import WorkflowEnvironment

from lw_temporal import Role, WorkflowDefinition
from lw_temporal.dreaming import DreamStatus, reject_dream
from lw_temporal.errors import WORKFLOW_ID_TAKEN
from lw_temporal.ids import DataLayout, pipeline_key
from lw_temporal.testing import ScriptedModel, tool
from workflows.pipeline import DEFINITIONS, sample_model

from ._dreaming_support import (
    dreaming_worker,
    read_records,
    start_dream,
    unique_definition,
    wait_for_status,
)
from ._hierarchy_support import failure_type, lw_worker


def _planner_model(target: str, word: str) -> ScriptedModel:
    return ScriptedModel(
        {
            (target, Role.PLANNER): [
                [tool("bash", command=f"echo {word} >> /mnt/scratch/own/notes.txt")],
                [tool("run_step", task="read the notes")],
                [tool("finish", summary=word)],
            ],
            (target, Role.WORKER): [
                [tool("bash", command=f"echo {word} > /mnt/scratch/own/step.txt")],
                [tool("finish", summary="read")],
            ],
        }
    )


def _tree(data_dir: Path) -> dict[str, bytes]:
    runs = data_dir / "runs"
    return {p.relative_to(runs).as_posix(): p.read_bytes() for p in runs.rglob("*") if p.is_file()}


async def _closed(client: Client, workflow_id: str, runs: int) -> None:
    """Wait until visibility lists ``runs`` closed runs of ``workflow_id``."""

    async def poll() -> None:
        while True:
            listed = [
                w
                async for w in client.list_workflows(
                    f"WorkflowId = '{workflow_id}' AND ExecutionStatus != 'Running'"
                )
            ]
            if len(listed) >= runs:
                return
            await asyncio.sleep(0.2)

    await asyncio.wait_for(poll(), 120)


async def test_a_second_run_under_a_planners_id_is_refused_and_dreamt_of_once(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    target = unique_definition("reuse")
    definition = WorkflowDefinition(id=target)
    planner = f"run_{target}@1"
    run_dir = data_dir / "runs" / planner
    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], _planner_model(target, "first")
    ) as client:
        await client.execute_workflow("lw.Planner", "go", id=planner, task_queue=task_queue)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert (run_dir / "scratch/notes.txt").read_text() == "first\n"

    async with lw_worker(
        dev_env, data_dir, task_queue, [definition], _planner_model(target, "second")
    ) as client:
        again = await client.start_workflow(
            "lw.Planner",
            "go",
            id=planner,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        assert await failure_type(again) == WORKFLOW_ID_TAKEN
        try:
            await again.result()
        except WorkflowFailureError as err:
            message = str(err.cause)
        assert planner in message and "new ID" in message, message
        await _closed(client, planner, 2)

    # The first run's scratch, and its step's, as it left them.
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before

    queue = f"{task_queue}-dream"
    async with dreaming_worker(dev_env, data_dir, queue, [target]) as client:
        dream = await start_dream(client, queue, target)
        state = await wait_for_status(dream, DreamStatus.AWAITING_APPROVAL, DreamStatus.NOTHING_NEW)
        assert state.runs == 1
        (record,) = read_records(data_dir, dream.id)
        assert (record.workflow_id, record.status) == (planner, "COMPLETED")
        if state.status is DreamStatus.AWAITING_APPROVAL:
            await reject_dream(client, dream.id, "test", "only counting")


async def test_a_second_pipeline_under_an_id_starts_nothing(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    pipeline = f"pipeline_{task_queue}"
    history = DataLayout.at(data_dir).pipeline_memory(pipeline_key(DEFINITIONS)) / "history.md"
    async with lw_worker(dev_env, data_dir, task_queue, DEFINITIONS, sample_model()) as client:
        await client.execute_workflow(
            "lw.Orchestrator", "review", id=pipeline, task_queue=task_queue
        )
        lines = history.read_text()
        runs = sorted(p.relative_to(data_dir).as_posix() for p in (data_dir / "runs").rglob("*"))
        again = await client.start_workflow(
            "lw.Orchestrator", "review again", id=pipeline, task_queue=task_queue
        )
        assert await failure_type(again) == WORKFLOW_ID_TAKEN
    # No duplicate history line, no sub-run or step started again (their counter would
    # have restarted at 1 and reused the first run's children's scratch).
    assert history.read_text() == lines
    assert lines.count(f"- {pipeline}:") == 1
    assert (
        sorted(p.relative_to(data_dir).as_posix() for p in (data_dir / "runs").rglob("*")) == runs
    )
