"""A command that sends a job to the background and does not wait for it is told, in
its result, that what was still running when its shell exited was stopped and its later
output lost: before, the job's output vanished without a word. A command that waits,
an ``&`` inside quotes and a ``&>`` redirection say nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._bash_parts import BACKGROUND_NOTE
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_bg@background"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_job_left_in_the_background_is_said(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="bg")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        left, nested, waited, quoted, redirected = await bash.run(
            PLANNER,
            [
                "(sleep 1; echo late) & echo now",
                "f() { sleep 1 & }; f; echo called",
                "sleep 0.2 & wait; echo done",
                "echo 'a & b'",
                "ls &> /dev/null; echo listed",
            ],
        )
    assert left.exit_code == 0 and left.stdout == "now\n"
    assert f"lw.bash: {BACKGROUND_NOTE}\n" in left.stderr
    assert nested.stdout == "called\n" and BACKGROUND_NOTE in nested.stderr
    for quiet, out in ((waited, "done\n"), (quoted, "a & b\n"), (redirected, "listed\n")):
        assert quiet.stdout == out and BACKGROUND_NOTE not in quiet.stderr, quiet
