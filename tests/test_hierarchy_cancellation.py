"""Cancelling a pipeline cancels its planners, their steps and the steps' running
activities: nothing below a cancelled run keeps working."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, ModelRequest, ModelResponse, Role, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker

ALPHA = WorkflowDefinition(id="alpha")


class StuckWorkerModel(ScriptedModel):
    """Scripted, except that a worker's model call never returns until cancelled."""

    def __init__(self) -> None:
        super().__init__(
            {
                (None, Role.ORCHESTRATOR): [[tool("plan_workflow", workflow="alpha")]],
                ("alpha", Role.PLANNER): [[tool("run_step", task="x")]],
            }
        )
        self.worker_started = asyncio.Event()
        self.worker_cancelled = asyncio.Event()

    async def next_turn(self, request: ModelRequest) -> ModelResponse:
        if request.role is not Role.WORKER:
            return await super().next_turn(request)
        self.worker_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.worker_cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_cancelling_the_pipeline_cancels_the_whole_tree(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    model = StuckWorkerModel()
    pipeline = f"pipeline_{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], model) as client:
        handle = await client.start_workflow(
            "lw.Orchestrator", AgentInput(), id=pipeline, task_queue=task_queue
        )
        await asyncio.wait_for(model.worker_started.wait(), timeout=120)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), timeout=120)
        await asyncio.wait_for(model.worker_cancelled.wait(), timeout=120)
        planner = f"{pipeline}/sub-runs/run_alpha@1"
        for workflow_id in (pipeline, planner, f"{planner}/steps/step_1"):
            description = await client.get_workflow_handle(workflow_id).describe()
            assert description.status == WorkflowExecutionStatus.CANCELED, workflow_id


def _processes_with(argv: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if argv in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_cancelling_the_pipeline_kills_a_running_sandboxed_command(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    seconds = f"300.{random.randrange(10**6):06d}"  # a unique, findable argv
    model = ScriptedModel(
        {
            (None, Role.ORCHESTRATOR): [[tool("plan_workflow", workflow="alpha")]],
            ("alpha", Role.PLANNER): [[tool("run_step", task="x")]],
            ("alpha", Role.WORKER): [
                [tool("bash", command=f"touch /mnt/scratch/own/started; sleep {seconds}")]
            ],
        }
    )
    pipeline = AgentId.orchestrator(task_queue)
    step = pipeline.sub_run("alpha", "1").step_run("1")
    started = DataLayout.at(data_dir).scratch(step) / "started"
    argv = f"sleep\0{seconds}".encode()
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], model) as client:
        handle = await client.start_workflow(
            "lw.Orchestrator", AgentInput(), id=str(pipeline), task_queue=task_queue
        )
        for _ in range(1200):
            if started.exists() and _processes_with(argv):
                break
            await asyncio.sleep(0.1)
        assert _processes_with(argv), "the command never started"
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), timeout=120)
        for _ in range(600):
            if not _processes_with(argv):
                break
            await asyncio.sleep(0.1)
        assert not _processes_with(argv), "the sandboxed command outlived its cancelled run"
        description = await client.get_workflow_handle(str(step)).describe()
        assert description.status == WorkflowExecutionStatus.CANCELED


async def test_terminating_the_pipeline_cancels_its_children(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    """Termination runs no workflow code; the parent close policy carries it down."""
    model = StuckWorkerModel()
    pipeline = f"pipeline_{task_queue}"
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], model) as client:
        handle = await client.start_workflow(
            "lw.Orchestrator", AgentInput(), id=pipeline, task_queue=task_queue
        )
        await asyncio.wait_for(model.worker_started.wait(), timeout=120)
        await handle.terminate("operator stopped the pipeline")
        await asyncio.wait_for(model.worker_cancelled.wait(), timeout=120)
        planner = f"{pipeline}/sub-runs/run_alpha@1"
        for workflow_id in (planner, f"{planner}/steps/step_1"):
            child = client.get_workflow_handle(workflow_id)
            with pytest.raises(WorkflowFailureError):
                await asyncio.wait_for(child.result(), timeout=120)
            assert (await child.describe()).status == WorkflowExecutionStatus.CANCELED
        assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
