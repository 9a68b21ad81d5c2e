"""A run's manifest (which memory it started from) is the worker's own, like every file
of the data dir's bookkeeping: 0600. It was written with the default mode (0644),
inside a 0700 folder, so only that folder kept agents out."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory._manifest import manifests_dir
from tests._bash_support import bash_worker

PLANNER = "pipeline_manifests/sub-runs/run_cr@1"


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root worker closes by mode")
async def test_run_manifests_are_the_workers_own(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox="bwrap")
    async with bash_worker(dev_env, plugin) as bash:
        await bash.run(PLANNER, ["echo one", "echo step"])
        await bash.one(f"{PLANNER}/steps/step_1", "echo two")
    found = sorted(manifests_dir(plugin.config.layout).iterdir())
    assert len(found) >= 2, found
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in found} == {
        p.name: oct(0o600) for p in found
    }
