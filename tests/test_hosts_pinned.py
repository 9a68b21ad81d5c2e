"""Two worker processes standing for two hosts (each its own runs root, one shared
memory root, ``--host``) complete concurrent pipelines: each pipeline's whole tree of
scratch is on the one host it was pinned to, every activity of the tree (model turns
included) ran on that host's worker, and every memory write is present once."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal.ids import DataLayout, parse_workflow_id
from workflows.pipeline import DEFINITIONS

from ._durability_worker import start_worker, wait_for
from ._hosts_support import PIPELINE_RUNS, assert_memory_written_once, assert_pipeline_whole
from .conftest import plugin_client

SAMPLE = "workflows.pipeline:sample_model"


async def test_two_hosts_keep_each_pipeline_on_one_host(
    dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    memory = tmp_path / "shared-memory"
    roots = {host: tmp_path / f"host-{host}" for host in ("a", "b")}

    def flags(host: str) -> list[str]:
        return [
            *("--memory-root", str(memory), "--runs-root", str(roots[host])),
            *("--host", host, "--create"),
        ]

    client = plugin_client(dev_env, LittleWorkflowPlugin(memory, DEFINITIONS))
    pipelines = [f"pipeline_{task_queue}-{n}" for n in range(4)]

    async def start(pipeline: str) -> asyncio.Task[AgentResult]:
        handle = await client.start_workflow(
            "lw.Orchestrator",
            AgentInput(),
            id=pipeline,
            task_queue=task_queue,
            result_type=AgentResult,
        )
        return asyncio.create_task(handle.result())

    workers = [await start_worker(dev_env, task_queue, *flags("b"), model=SAMPLE)]
    pids = {"b": workers[0].pid}
    try:
        # The first two start while only host b polls: they are pinned to b, and stay
        # there once host a joins and runs some of their workflow tasks.
        results = [await start(p) for p in pipelines[:2]]
        on_b = DataLayout.split(memory, roots["b"])
        await wait_for(
            lambda: all(on_b.run_marker(parse_workflow_id(p)).exists() for p in pipelines[:2])
        )
        workers.append(await start_worker(dev_env, task_queue, *flags("a"), model=SAMPLE))
        pids["a"] = workers[1].pid
        results += [await start(p) for p in pipelines[2:]]
        done = await asyncio.wait_for(asyncio.gather(*results), timeout=300)
    finally:
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            await asyncio.wait_for(proc.wait(), timeout=60)
    assert {r.summary for r in done} == {"candidate Dana Reyes reviewed and scored 8/10"}

    layouts = {host: DataLayout.split(memory, root) for host, root in roots.items()}
    placed: dict[str, str] = {}
    for pipeline in pipelines:
        holders = {h for h, layout in layouts.items() if (layout.runs / pipeline).exists()}
        assert len(holders) == 1, f"{pipeline} has scratch on hosts {sorted(holders)}"
        (host,) = holders
        placed[pipeline] = host
        runs = layouts[host].runs
        for run in PIPELINE_RUNS:
            folder = runs / pipeline / run
            assert (folder / "scratch").is_dir(), folder
            workflow_id = pipeline if run == "." else f"{pipeline}/{run}"
            marker = layouts[host].run_marker(parse_workflow_id(workflow_id))
            assert json.loads(marker.read_text())["host"] == host
            ran_by = await _activity_workers(client, workflow_id)
            assert ran_by and ran_by <= {pids[host]}, (workflow_id, ran_by, pids)
        assert_pipeline_whole(runs, pipeline)
    assert placed[pipelines[0]] == placed[pipelines[1]] == "b"

    # One memory for both hosts, bound to both runs roots.
    ids = {json.loads(layout.binding_file.read_text())["memory_id"] for layout in layouts.values()}
    assert ids == {layouts["a"].memory_id_file.read_text().strip()}
    assert not (memory / "runs").exists()
    assert_memory_written_once(layouts["a"], pipelines)


async def _activity_workers(client: Client, workflow_id: str) -> set[int]:
    """The pids of the workers that started the run's (regular) activities."""
    events = (await client.get_workflow_handle(workflow_id).fetch_history()).events
    return {
        int(e.activity_task_started_event_attributes.identity.split("@")[0])
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }
