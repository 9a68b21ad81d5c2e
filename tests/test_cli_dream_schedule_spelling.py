"""``dream schedule`` refuses a misspelt definition, naming the one meant, and takes
the right one at once, where the server has runs of it that index no search
attributes (a worker started without ``--search-attributes``): the check reads the
definitions from the planners' workflow IDs the server lists too. Before, it read only
``LwDefinition``, so such a run's definition was unknown whenever any other run on the
server was indexed.

The planner is started and never run (no worker polls its queue): the check reads
only what the server lists."""

from __future__ import annotations

import asyncio
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal.ids import PLANNER_WORKFLOW

from ._live_support import lw

SCHEDULE = "lw-dream-spelling-check"


async def _listed(env: WorkflowEnvironment, workflow_id: str) -> None:
    """Until the server's visibility lists the run (it trails a start by a moment)."""
    for _ in range(200):
        async for _found in env.client.list_workflows(f"WorkflowId = '{workflow_id}'"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{workflow_id} never listed")


async def test_a_misspelt_definition_is_refused_and_the_right_one_taken(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The schedule's input is sealed: with no worker here, a data dir of its own holds
    # the key (the session's other workers' stores are registered for this server too).
    data = tmp_path / "data"
    (data / ".lw").mkdir(parents=True)
    handle = await dev_env.client.start_workflow(
        PLANNER_WORKFLOW, id="run_spellcheck@sp1", task_queue="nobody-polls-spelling"
    )
    try:
        await _listed(dev_env, handle.id)
        options = (
            "--every", "1h", "--schedule-id", SCHEDULE, "--task-queue", "spelling",
            "--data-dir", str(data),
        )  # fmt: skip
        code, out, err = await lw(dev_env, "dream", "schedule", "spellchek", *options)
        assert code == 2, (out, err)
        assert "no definition 'spellchek'" in err and "did you mean spellcheck?" in err, err
        assert "Traceback" not in err

        code, out, err = await lw(dev_env, "dream", "schedule", "spellcheck", *options)
        assert code == 0, (out, err)
        await dev_env.client.get_schedule_handle(SCHEDULE).delete()
    finally:
        await handle.terminate("the test is over")
