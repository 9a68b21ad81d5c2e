"""``lw-temporal status`` of a running tree shows, under a running agent, what it last
said (``says:``) and the newest output of the command it is running (``|`` lines, from
the ``lw.bash`` heartbeat), as the README's "See what the agents did" says; before,
the snapshot printed only each agent's own line, so a status of a long command never
showed what it was printing."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import Role, WorkflowDefinition
from lw_temporal.testing import ScriptedModel, tool

from ._live_support import lw, worker_process

TASK_QUEUE = "status-output"
DEFINITIONS = (WorkflowDefinition(id="talky", instructions="Talk, then wait."),)
MODEL = ScriptedModel(
    {
        ("talky", Role.PLANNER): [
            [tool("bash", command="echo warming-up-now; sleep 300", timeout_seconds=600)],
            [tool("finish", summary="done")],
        ]
    }
)
HERE = "tests.test_status_snapshot_shows_running_output"


async def test_status_of_a_running_command_shows_its_newest_output(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    async with worker_process(
        dev_env, data_dir, TASK_QUEUE, definitions=f"{HERE}:DEFINITIONS", model=f"{HERE}:MODEL"
    ):
        run = asyncio.create_task(
            lw(dev_env, "run", "talky", "Talk.", "--task-queue", TASK_QUEUE, "--id", "s1")
        )
        try:
            out = ""
            for _ in range(60):  # heartbeats go out every 2 s at most
                code, out, err = await lw(dev_env, "status", "run_talky@s1")
                assert code == 0 or "no workflow" in err, (out, err)  # not started yet
                if "| warming-up-now" in out:
                    break
                await asyncio.sleep(0.5)
            assert re.search(r"^run_talky@s1  planner talky  running tools \(bash\)", out, re.M)
            assert re.search(r"^    says: ", out, re.M), out
            assert re.search(r"^    \| warming-up-now$", out, re.M), out
        finally:
            await lw(dev_env, "cancel", "run_talky@s1")
            await run
