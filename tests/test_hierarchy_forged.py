"""A workflow started under an ID that is not its parent's extension, of another role,
or outside the grammar fails at once with a typed, non-retryable error."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role, WorkflowDefinition
from lw_temporal.errors import HIERARCHY_VIOLATION, INVALID_WORKFLOW_ID, UNKNOWN_DEFINITION
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import failure_type, lw_worker

ALPHA = WorkflowDefinition(id="alpha")
MODEL = ScriptedModel(
    {
        ("alpha", Role.PLANNER): [[tool("finish", summary="planned")]],
        ("alpha", Role.WORKER): [[tool("finish", summary="worked")]],
    }
)


@pytest.mark.parametrize(
    ("workflow_type", "workflow_id", "kind"),
    [
        # A client may not drop a step into someone's run: steps belong to their planner.
        ("lw.Worker", "run_alpha@{t}/steps/step_1", HIERARCHY_VIOLATION),
        # Nor a sub-run into someone's pipeline.
        ("lw.Planner", "pipeline_{t}/sub-runs/run_alpha@1", HIERARCHY_VIOLATION),
        # A planner ID run as a worker would get a planner's writable memory.
        ("lw.Worker", "run_alpha@{t}", INVALID_WORKFLOW_ID),
        ("lw.Orchestrator", "run_alpha@{t}", INVALID_WORKFLOW_ID),
        ("lw.Planner", "run_alpha@{t}/../x", INVALID_WORKFLOW_ID),
        ("lw.Planner", "run_unregistered@{t}", UNKNOWN_DEFINITION),
    ],
)
async def test_forged_or_malformed_ids_fail_typed(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    workflow_type: str,
    workflow_id: str,
    kind: str,
) -> None:
    async with lw_worker(dev_env, data_dir, task_queue, [ALPHA], MODEL) as client:
        handle = await client.start_workflow(
            workflow_type,
            AgentInput(),
            id=workflow_id.format(t=task_queue),
            task_queue=task_queue,
        )
        assert await failure_type(handle) == kind
    # Nothing was written for a refused run (the worker's start secures an empty runs/).
    runs = data_dir / "runs"
    assert not runs.exists() or not any(runs.iterdir()), sorted(runs.iterdir())
