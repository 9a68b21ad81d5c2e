"""Two worker processes with data dirs of their own on one task queue and no ``--host``
(neither supported topology): every pipeline either completes whole on one disk, each
step having read its planner's plan, or fails naming the topology; none completes with
a step that worked against an empty ``/mnt/scratch/from-planner/``."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal.ids import DataLayout
from lw_temporal.options import PrivacyOptions
from workflows.pipeline import DEFINITIONS

from ._durability_worker import start_worker, wait_for
from ._hosts_support import REVIEW, assert_pipeline_whole
from .conftest import plugin_client

SAMPLE = "workflows.pipeline:sample_model"
#: In the clear: each data dir would otherwise hold its own payload keys, and a worker
#: that cannot open a payload fails before any topology check.
PLAINTEXT = PrivacyOptions(encrypt=False)
SUMMARY = "candidate Dana Reyes reviewed and scored 8/10"


def _topology_failure(err: BaseException) -> ApplicationError | None:
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type == "LwWrongTopology":
            return cause
        cause = cause.__cause__
    return None


def _flags(disk: DataLayout) -> list[str]:
    return ["--data-dir", str(disk.root), "--create", "--plaintext-payloads"]


async def _stop(proc: asyncio.subprocess.Process) -> None:
    proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(proc.wait(), timeout=60)


async def test_a_tree_whose_work_moves_to_another_disk_fails_naming_the_topology(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    disks = {name: DataLayout.at(tmp_path / name) for name in ("a", "b")}
    client = plugin_client(
        dev_env, LittleWorkflowPlugin(disks["a"].root, DEFINITIONS, privacy=PLAINTEXT)
    )
    pipeline = f"pipeline_{task_queue}"
    first = await start_worker(dev_env, task_queue, *_flags(disks["a"]), model=SAMPLE)
    second = None
    try:
        handle = await client.start_workflow(
            "lw.Orchestrator", AgentInput(), id=pipeline, task_queue=task_queue,
            result_type=AgentResult,
        )  # fmt: skip
        # The planner has written its plan on disk a; its steps (and everything the
        # tree does next) are left to a worker with a disk of its own.
        await wait_for((disks["a"].runs / pipeline / REVIEW / "scratch/plan.md").exists)
        await _stop(first)
        second = await start_worker(dev_env, task_queue, *_flags(disks["b"]), model=SAMPLE)
        try:
            result = await asyncio.wait_for(handle.result(), timeout=300)
        except WorkflowFailureError as err:
            failure = _topology_failure(err)
            assert failure is not None, repr(err)
        else:
            raise AssertionError(f"the pipeline completed across two disks: {result}")
    finally:
        for proc in (first, second):
            if proc is not None and proc.returncode is None:
                await _stop(proc)
    assert "does not hold the run's scratch" in failure.message, failure.message
    assert "shared volume" in failure.message and "--host" in failure.message
    # Disk b holds nothing of the tree: nothing there ran against its empty scratch.
    assert not (disks["b"].runs / pipeline).exists()
    # Every step that ran (on disk a, stopped with its worker or not) read its plan.
    _assert_steps_read_their_plan(disks["a"].runs / pipeline)


async def test_two_disks_on_one_queue_complete_whole_or_fail_naming_the_topology(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    disks = {name: DataLayout.at(tmp_path / name) for name in ("a", "b")}
    client = plugin_client(
        dev_env, LittleWorkflowPlugin(disks["a"].root, DEFINITIONS, privacy=PLAINTEXT)
    )
    pipelines = [f"pipeline_{task_queue}-{n}" for n in range(3)]
    workers = [
        await start_worker(dev_env, task_queue, *_flags(d), model=SAMPLE) for d in disks.values()
    ]
    try:
        handles = [
            await client.start_workflow(
                "lw.Orchestrator", AgentInput(), id=p, task_queue=task_queue,
                result_type=AgentResult,
            )
            for p in pipelines
        ]  # fmt: skip
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles), return_exceptions=True), 300
        )
    finally:
        for proc in workers:
            await _stop(proc)
    for pipeline, outcome in zip(pipelines, outcomes, strict=True):
        holders = [d for d in disks.values() if (d.runs / pipeline).exists()]
        if isinstance(outcome, AgentResult):
            assert outcome.summary == SUMMARY
            assert len(holders) == 1, f"{pipeline} completed with scratch on two disks"
            assert_pipeline_whole(holders[0].runs, pipeline)
        else:
            assert isinstance(outcome, WorkflowFailureError), repr(outcome)
            assert _topology_failure(outcome) is not None, repr(outcome)
            for disk in holders:
                _assert_steps_read_their_plan(disk.runs / pipeline)


def _assert_steps_read_their_plan(tree: Path) -> None:
    """Every step that ran on this disk saw its planner's plan there. A failed
    pipeline's steps may be cancelled (their parent failed) or stopped with their
    worker part way through their command, so a step's file is checked as far as it
    got: its planner's plan is on the same disk (the step's ``from-planner`` mount),
    and the line the step copies from it, when written, is the plan's."""
    for found in tree.glob("sub-runs/*/steps/*/scratch/*.md"):
        plan = found.parents[3] / "scratch/plan.md"
        assert plan.is_file(), f"{found}: written without its planner's plan on this disk"
        lines = found.read_text().splitlines()
        if len(lines) > 1:
            assert lines[1] in plan.read_text().splitlines(), (found, lines)
