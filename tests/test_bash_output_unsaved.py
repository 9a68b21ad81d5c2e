"""A stream that outgrows the result's cap but cannot be saved says so, and the command
still gets its result. The worker creates the saved file in the agent's own scratch,
in a folder the agent can tamper with (a non-root worker, the agent's own uid, cannot
pass it once the agent made it 0000); the failure was raised from the event loop's
pipe reader, and the output past the cap was dropped without a word, the result naming
no file. Here the folder is made immutable on the host, which stops root too."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash import OUTPUT_FOLDER
from tests._bash_support import bash_worker

PLANNER = "run_cr@unsaved"


def _immutable(folder: Path, on: bool) -> bool:
    flag = "+i" if on else "-i"
    done = subprocess.run(["chattr", flag, str(folder)], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("chattr") is None, reason="needs root and chattr"
)
async def test_an_output_that_cannot_be_saved_says_so(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox="bwrap")
    folder = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch / OUTPUT_FOLDER
    async with bash_worker(dev_env, plugin) as bash:
        first = await bash.one(PLANNER, "echo warm")  # the scratch exists now
        folder.mkdir()
        if not _immutable(folder, True):
            pytest.skip("the file system has no immutable flag")
        try:
            big, after = await bash.run(PLANNER, ["yes | head -c 300000", "echo after"])
        finally:
            _immutable(folder, False)
    assert first.stdout == "warm\n"
    assert big.exit_code == 0 and big.stdout_truncated and big.stdout_bytes == 300_000
    assert big.stdout_ref is None and len(big.stdout) == 64 * 1024, big.stdout_ref
    assert big.stderr.startswith("lw.bash: stdout was 300000 bytes: it is not saved ("), big
    assert after.stdout == "after\n"
