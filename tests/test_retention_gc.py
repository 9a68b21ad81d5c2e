"""Scratch retention removes the scratch of runs closed longer than the retention, and
never a running run's (nor one inside a running pipeline); the default keeps all;
``--dry-run`` only lists; every removal is audited."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest_asyncio
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from lw_temporal.ids import DataLayout, parse_workflow_id
from lw_temporal.memory import RetentionPolicy, collect_garbage

from ._cli_support import cli
from .conftest import pydantic_client


@workflow.defn(name="lw.Planner", sandboxed=False)
class DonePlanner:
    @workflow.run
    async def run(self) -> None:
        return None


@dataclass
class Runs:
    """Scratch folders of runs in every state the retention must tell apart."""

    client: Client
    layout: DataLayout
    done: str  # closed
    running: str  # still running
    in_running_pipeline: str  # closed, but its pipeline still runs
    ghost: str  # Temporal never heard of it (history gone)

    def scratch(self, workflow_id: str) -> Path:
        return self.layout.scratch(parse_workflow_id(workflow_id))


@pytest_asyncio.fixture
async def runs(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> AsyncIterator[Runs]:
    client = pydantic_client(dev_env)
    token = uuid.uuid4().hex[:8]
    idle_queue = f"{task_queue}-nobody"  # no worker polls it: its workflows stay running
    done = f"run_gc@{token}-done"
    running = f"run_gc@{token}-running"
    pipeline = f"pipeline_{token}"
    in_pipeline = f"{pipeline}/sub-runs/run_gc@{token}-child"
    async with Worker(client, task_queue=task_queue, workflows=[DonePlanner]):
        await client.execute_workflow("lw.Planner", id=done, task_queue=task_queue)
        await client.execute_workflow("lw.Planner", id=in_pipeline, task_queue=task_queue)
    handles = [
        await client.start_workflow("lw.Planner", id=running, task_queue=idle_queue),
        await client.start_workflow("lw.Orchestrator", id=pipeline, task_queue=idle_queue),
    ]
    state = Runs(client, DataLayout.at(data_dir), done, running, in_pipeline, f"run_gc@{token}-x")
    for workflow_id in (done, running, in_pipeline, state.ghost, pipeline):
        scratch = state.scratch(workflow_id)
        (scratch / "sub").mkdir(parents=True)
        (scratch / "notes.md").write_text(f"{workflow_id}\n")
        (scratch / "sub" / "data.bin").write_bytes(b"x" * 1000)
    try:
        yield state
    finally:
        for handle in handles:
            await handle.terminate()


def audit(layout: DataLayout) -> list[dict[str, object]]:
    log = layout.state / "audit" / "retention.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def later() -> datetime:
    """A clock two days ahead: every run closed in this test is then a day past the
    retention, with no waiting and no assertion on elapsed time."""
    return datetime.now(UTC) + timedelta(days=2)


async def test_default_policy_keeps_every_scratch(runs: Runs) -> None:
    report = await collect_garbage(runs.client, runs.layout, RetentionPolicy(), actor="test")
    assert report.removed_count == 0
    assert runs.scratch(runs.done).is_dir()


async def test_retention_removes_closed_runs_only_and_audits(runs: Runs) -> None:
    report = await collect_garbage(
        runs.client,
        runs.layout,
        RetentionPolicy(retain=timedelta(days=1)),
        actor="ops",
        now=later(),
    )
    removed = {item.workflow_id for item in report.removed}
    assert removed == {runs.done, runs.ghost}
    assert not runs.scratch(runs.done).exists() and not runs.scratch(runs.ghost).exists()
    assert runs.scratch(runs.running).is_dir(), "a running run's scratch is never removed"
    assert runs.scratch(runs.in_running_pipeline).is_dir(), "its pipeline still runs"
    assert report.kept_running == 3  # running, the pipeline, and its closed sub-run
    ghost = next(i for i in report.removed if i.workflow_id == runs.ghost)
    assert "unknown to Temporal" in ghost.why
    assert all(i.files == 2 and i.bytes == len(i.workflow_id) + 1 + 1000 for i in report.removed)
    entries = {str(e["workflow_id"]): e for e in audit(runs.layout)}
    assert set(entries) == {runs.done, runs.ghost}
    assert entries[runs.done]["actor"] == "ops"
    assert entries[runs.done]["op"] == "scratch.delete"
    assert entries[runs.done]["retain_seconds"] == 86400


async def test_recently_closed_runs_are_kept(runs: Runs) -> None:
    report = await collect_garbage(
        runs.client, runs.layout, RetentionPolicy(retain=timedelta(days=30)), actor="ops"
    )
    assert report.removed_count == 0 and report.kept_recent == 2
    assert runs.scratch(runs.done).is_dir()


async def test_dry_run_lists_without_removing(runs: Runs) -> None:
    report = await collect_garbage(
        runs.client,
        runs.layout,
        RetentionPolicy(retain=timedelta(days=1), dry_run=True),
        actor="ops",
        now=later(),
    )
    assert {i.workflow_id for i in report.removed} == {runs.done, runs.ghost}
    assert runs.scratch(runs.done).is_dir() and runs.scratch(runs.ghost).is_dir()
    assert audit(runs.layout) == []


async def test_cli_gc_dry_run_shows_what_it_would_remove(
    runs: Runs, dev_env: WorkflowEnvironment
) -> None:
    # Make "closed longer than 1s ago" true without asserting on elapsed time: the
    # ghost's age comes from its files, so age them.
    old = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    for path in [runs.scratch(runs.ghost), *runs.scratch(runs.ghost).rglob("*")]:
        os.utime(path, (old, old))
    code, text, err = await cli(
        dev_env, "gc", "--data-dir", str(runs.layout.root), "--retain", "2d", "--dry-run"
    )
    assert code == 0, err
    ghost_path = runs.scratch(runs.ghost).relative_to(runs.layout.root).as_posix()
    assert f"would remove {ghost_path} (2 files" in text
    assert runs.done not in text, "closed just now: younger than 2d"
    assert "would remove 1 scratch folders" in text
    assert runs.scratch(runs.ghost).is_dir()
