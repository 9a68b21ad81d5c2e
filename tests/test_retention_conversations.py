"""What the agents leave in the bookkeeping follows the scratch retention policy: a run's
conversation folders and a dream's proposal folder go once the run closed longer than
the retention ago, never while it or an ancestor runs, each removal audited; the
dreaming cursor and state, which every later dream needs, stay."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal.ids import DataLayout
from lw_temporal.memory import RetentionPolicy, collect_garbage

from .conftest import pydantic_client


@workflow.defn(name="lw.Planner", sandboxed=False)
class DonePlanner:
    @workflow.run
    async def run(self) -> None:
        return None


@workflow.defn(name="lw.Dreaming", sandboxed=False)
class DoneDream:
    @workflow.run
    async def run(self) -> None:
        return None


def _conversation(layout: DataLayout, workflow_id: str) -> Path:
    folder = layout.local_state / "conversations" / workflow_id / "01a2-run"
    folder.mkdir(parents=True)
    (folder / "turn-000000.json").write_text('{"turn": 0}')
    results = folder.parent / "results" / "01a2-run"
    results.mkdir(parents=True)
    (results / "tool-0-0.txt").write_text("output")
    return folder.parent


async def test_conversations_and_dream_proposals_age_out_with_their_runs(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    client = pydantic_client(dev_env)
    layout = DataLayout.at(data_dir)
    token = uuid.uuid4().hex[:8]
    done, running = f"run_gc@{token}-done", f"run_gc@{token}-running"
    pipeline = f"pipeline_{token}"
    child = f"{pipeline}/sub-runs/run_gc@{token}-child"
    dream = f"dream_gc@{token}"
    async with Worker(client, task_queue=task_queue, workflows=[DonePlanner, DoneDream]):
        for workflow_id, kind in (
            (done, "lw.Planner"),
            (child, "lw.Planner"),
            (dream, "lw.Dreaming"),
        ):
            await client.execute_workflow(kind, id=workflow_id, task_queue=task_queue)
    idle = f"{task_queue}-nobody"
    handles = [
        await client.start_workflow("lw.Planner", id=running, task_queue=idle),
        await client.start_workflow("lw.Orchestrator", id=pipeline, task_queue=idle),
    ]
    try:
        folders = {w: _conversation(layout, w) for w in (done, running, child, pipeline)}
        books = layout.state / "dreaming" / "gc"
        proposal = books / "proposals" / dream
        proposal.mkdir(parents=True)
        (proposal / "diff.txt").write_text("+ a lesson\n")
        (books / "cursor.json").write_text("{}")
        report = await collect_garbage(
            client,
            layout,
            RetentionPolicy(retain=timedelta(days=1)),
            actor="test",
            now=datetime.now(UTC) + timedelta(days=2),
        )
    finally:
        for handle in handles:
            await handle.terminate()

    gone = {(i.what, i.workflow_id) for i in report.bookkeeping_removed}
    assert gone == {("conversation", done), ("dream proposal", dream)}, gone
    assert report.bookkeeping_removed_count == 3  # done's turn folder and its results
    assert not (folders[done] / "01a2-run").exists() and not (folders[done] / "results").exists()
    for kept in (running, child, pipeline):  # running, or inside a running pipeline
        assert (folders[kept] / "01a2-run" / "turn-000000.json").exists(), kept
    assert (folders[pipeline] / "sub-runs").is_dir(), "a parent's folder keeps its children's"
    assert not proposal.exists() and (books / "cursor.json").exists()
    lines = [
        json.loads(x) for x in (layout.state / "audit" / "retention.jsonl").read_text().splitlines()
    ]
    assert {line["op"] for line in lines} == {"conversation.delete", "dream-proposal.delete"}
    assert all(line["actor"] == "test" for line in lines)
