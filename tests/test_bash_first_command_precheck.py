"""The pre-check knows the backend from the first command on: without a mount view
(Landlock) a write to writable memory is refused before it runs, saying to use
``lw.memory.*``. The worker's run context selects the backend before any command, but
``BashActivities`` run without it (its activities registered by hand, a benchmark
calling ``run``) pre-checked its first command as if memory were staged, so that write
ran, failed on "Permission denied" and got no hint."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._pathcheck import NO_STAGED_MEMORY
from lw_temporal._sandbox import landlock_abi
from tests._bash_support import bash_worker

PLANNER = "run_cr@first"


@pytest.mark.skipif(landlock_abi() < 6, reason="needs Landlock ABI 6+")
async def test_the_first_memory_write_is_refused_before_it_runs(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox="landlock")
    async with bash_worker(dev_env, plugin) as bash:  # no run context: nothing selected
        first, again = await bash.run(PLANNER, ["echo x > /mnt/memory/workflow/n.md"] * 2)
    for result in (first, again):
        assert result.rejection is not None, result
        assert result.rejection.endswith(NO_STAGED_MEMORY), result.rejection
