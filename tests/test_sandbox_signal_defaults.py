"""A command starts with SIGPIPE and SIGXFSZ at their default dispositions on both
backends: the Landlock launcher is a Python process, which ignores both, and an
ignored signal survives ``exec``. Left so, ``yes | head -1`` printed "Broken pipe"
and ended with status 1 instead of 141, and a write past ``RLIMIT_FSIZE`` failed with
EFBIG instead of ending the writer as it does under bwrap."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@signals"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_signals_start_at_their_defaults(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        ignored, pipe, fsize = await bash.run(
            PLANNER,
            [
                "grep '^SigIgn:' /proc/self/status",
                "yes | head -1; echo ${PIPESTATUS[@]}",
                "ulimit -f 1; head -c 8192 /dev/zero > big; echo $?",
            ],
        )
    mask = int(ignored.stdout.split()[1], 16)  # what else is ignored is the worker's own
    assert mask & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)) == 0, ignored.stdout
    assert (pipe.stdout, pipe.stderr) == ("y\n141 0\n", ""), pipe
    assert fsize.stdout == "153\n", fsize  # 128 + SIGXFSZ
