"""A worker process SIGKILLed while a pipeline's sandboxed command runs: a new worker
process carries the pipeline to the end, each memory mutation happens once, and the
scratch layout is whole."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections import Counter
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal.ids import DataLayout, pipeline_key
from workflows.pipeline import DEFINITIONS

from ._durability_worker import MARKER, start_worker, wait_for
from .conftest import plugin_client


async def test_pipeline_survives_a_sigkilled_worker(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    layout = DataLayout.at(data_dir)
    pipeline = f"pipeline_{task_queue}"
    review = layout.runs / pipeline / "sub-runs/run_candidate-review@1"
    client = plugin_client(dev_env, LittleWorkflowPlugin(data_dir, DEFINITIONS))

    first = await start_worker(dev_env, task_queue, "--data-dir", str(data_dir))
    handle = await client.start_workflow(
        "lw.Orchestrator",
        AgentInput(),
        id=pipeline,
        task_queue=task_queue,
        result_type=AgentResult,
    )
    await wait_for(lambda: any(review.glob(f"steps/step_*/scratch/{MARKER}")))
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait()
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    second = await start_worker(dev_env, task_queue, "--data-dir", str(data_dir))
    try:
        result = await asyncio.wait_for(handle.result(), timeout=300)
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.wait(), timeout=60)
    assert result.summary == "candidate Dana Reyes reviewed and scored 8/10"

    # The kill hit a running command: some step's lw.bash ran a second attempt.
    attempts = []
    for step in (1, 2, 3):
        history = await client.get_workflow_handle(
            f"{pipeline}/sub-runs/run_candidate-review@1/steps/step_{step}"
        ).fetch_history()
        attempts += [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
    assert max(attempts) >= 2

    # Scratch is whole: every step wrote its findings from the mounts it reads.
    for step, task in ((1, "resume"), (2, "gap-analysis"), (3, "references")):
        findings = (review / f"steps/step_{step}/scratch/findings.md").read_text()
        assert findings.splitlines()[0] == f"# {task}"
        assert findings.splitlines()[-1].startswith("Candidate: Dana Reyes")
    for step in (1, 2):
        scoring = layout.runs / pipeline / "sub-runs/run_candidate-scoring@2"
        assert (scoring / f"steps/step_{step}/scratch/score.md").read_text().count("4/5") == 1

    # Each memory mutation happened once, in the files and in the audit log.
    lessons = (layout.workflow_memory("candidate-review") / "lessons-learned.md").read_text()
    assert lessons.count(f"## {pipeline}/sub-runs/run_candidate-review@1\n") == 1
    history_md = layout.pipeline_memory(pipeline_key(DEFINITIONS)) / "history.md"
    assert history_md.read_text().count(pipeline) == 1
    audit: Counter[tuple[str, str]] = Counter()
    for log in layout.state.rglob("audit.jsonl"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            audit[(entry["store"], entry["path"])] += 1
    assert set(audit.values()) == {1}
    assert len(audit) == 4
