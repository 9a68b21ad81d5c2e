"""The shared-volume topology: three worker processes on one data dir run concurrent
pipelines, one is SIGKILLed mid-run, and the other two finish every pipeline with
nothing lost and no memory write applied twice."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal.ids import DataLayout
from workflows.pipeline import DEFINITIONS

from ._durability_worker import MARKER, start_worker, wait_for
from ._hosts_support import assert_memory_written_once, assert_pipeline_whole
from .conftest import plugin_client


async def test_several_workers_on_one_volume_survive_a_kill(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    layout = DataLayout.at(data_dir)
    client = plugin_client(dev_env, LittleWorkflowPlugin(data_dir, DEFINITIONS))
    pipelines = [f"pipeline_{task_queue}-{n}" for n in range(4)]
    workers = [
        await start_worker(dev_env, task_queue, "--data-dir", str(data_dir)) for _ in range(3)
    ]
    try:
        handles = [
            await client.start_workflow(
                "lw.Orchestrator",
                AgentInput(),
                id=pipeline,
                task_queue=task_queue,
                result_type=AgentResult,
            )
            for pipeline in pipelines
        ]
        await wait_for(lambda: any(layout.runs.glob(f"*/sub-runs/*/steps/*/scratch/{MARKER}")))
        os.killpg(workers[0].pid, signal.SIGKILL)
        await workers[0].wait()
        done = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 300)
    finally:
        for proc in workers[1:]:
            proc.send_signal(signal.SIGTERM)
        for proc in workers[1:]:
            await asyncio.wait_for(proc.wait(), timeout=60)
    assert {r.summary for r in done} == {"candidate Dana Reyes reviewed and scored 8/10"}
    for pipeline in pipelines:
        assert_pipeline_whole(layout.runs, pipeline)
    assert_memory_written_once(layout, pipelines)
