"""A mount whose store or scratch does not exist yet is shown as an empty, read-only
folder, and what a command is told about a path in it names that mount: a planner
reading a note its workflow store does not have yet hears of
``/mnt/memory/workflow/...``, not of another missing mount. Under Landlock (no mount
view) the command sees the folders' real paths and the result names them back, so
each missing mount has an empty folder of its own (one shared folder named every
missing mount after whichever sorted first: ``/mnt/scratch/from-orchestrator/``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import bash_worker
from tests._escape_support import BACKENDS

PLANNER = "pipeline_names/sub-runs/run_cr@1"
STEP = f"{PLANNER}/steps/step_1"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_missing_mount_is_named_as_itself(
    dev_env: WorkflowEnvironment, data_dir: Path, backend: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=backend)
    async with bash_worker(dev_env, plugin) as bash:
        planner = await bash.one(
            PLANNER, "ls /mnt/memory/workflow/no-note; cat /mnt/memory/org/no-policy"
        )
        step = await bash.one(STEP, "cat /mnt/scratch/from-planner/plan.md; ls /mnt/memory/org")
    assert "/mnt/memory/workflow/no-note" in planner.stderr, planner.stderr
    assert "/mnt/memory/org/no-policy" in planner.stderr, planner.stderr
    assert "from-orchestrator" not in planner.stderr, planner.stderr
    assert "/mnt/scratch/from-planner/plan.md" in step.stderr, step.stderr
    assert step.stdout == "", step.stdout  # the org store's folder: empty
    for result in (planner, step):
        assert ".lw" not in result.stderr and str(data_dir) not in result.stderr, result.stderr
