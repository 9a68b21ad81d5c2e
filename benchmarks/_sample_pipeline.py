"""The sample pipeline as the overhead benchmarks run it: a plugin on its own seeded
data dir, and one pipeline timed from start to result. One module for
``callers.py``, ``privacy_overhead.py`` and ``tracing_overhead.py``, so each compares
its two setups on the same pipeline, timed the same way.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client

from lw_temporal import AgentInput, AgentResult, LittleWorkflowPlugin
from lw_temporal._cli._demo_run import _seed_org_memory
from lw_temporal.ids import DataLayout
from workflows.pipeline import DEFINITIONS, sample_model

TASK = "Review and score candidate Dana Reyes for job ABC-123."


def sample_plugin(data_dir: Path, **options: Any) -> LittleWorkflowPlugin:
    """The sample pipeline's plugin on ``data_dir`` (the org memory seeded as the demo
    seeds it), with ``options`` for the plugin (privacy, tracing, model calls...)."""
    _seed_org_memory(DataLayout.at(data_dir))
    return LittleWorkflowPlugin(data_dir, DEFINITIONS, model=sample_model(), **options)


async def run_pipeline(client: Client, task_queue: str, workflow_id: str | None = None) -> float:
    """Wall seconds of one pipeline, from its start to its result."""
    started = time.perf_counter()
    await client.execute_workflow(
        "lw.Orchestrator",
        AgentInput(task=TASK),
        id=workflow_id or f"pipeline_{uuid.uuid4().hex[:10]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )
    return time.perf_counter() - started
