"""wget runs without a word about its system configuration on both backends: under
Landlock the host's ``/etc/wgetrc`` was there but closed, and every wget printed
"Cannot read /etc/wgetrc (Permission denied)" (bwrap showed none). The sandbox gives
an empty generated one on both (``SYSTEM_WGETRC`` under Landlock)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@wgetrc"


@pytest.mark.skipif(shutil.which("wget") is None, reason="needs wget")
@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_wget_is_quiet(dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(PLANNER, "wget --version >/dev/null && wc -c < /etc/wgetrc")
    assert (result.exit_code, result.stdout, result.stderr) == (0, "0\n", ""), result
