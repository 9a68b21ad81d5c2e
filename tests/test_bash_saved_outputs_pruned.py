"""A long run's saved outputs never fill its scratch: each command that says more than
the cap saves its output behind ``stdout_ref``, and the saved files count against the
agent's scratch quota, so after about seventeen large outputs (1 GiB) the quota took
what the agent's next commands wrote. The saved outputs of earlier commands are now
cut, oldest first, to a quarter of the quota; the newest stay whole, and nothing else
of the agent's scratch is touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.options import BashOptions, Limits
from tests._bash_support import SANDBOXES, bash_worker, saved_file

PLANNER = "run_cr@pruned"
MIB = 1 << 20
COMMANDS = 14
SIZE = 400_000


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_old_saved_outputs_go_first_and_the_quota_is_never_reached(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir,
        [WorkflowDefinition(id="cr")],
        sandbox=sandbox,
        bash=BashOptions(limits=Limits(writable_bytes=4 * MIB)),
    )
    scratch = plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch
    async with bash_worker(dev_env, plugin) as bash:
        mine = await bash.one(PLANNER, "head -c 500000 /dev/urandom > work.bin && echo ok")
        results = await bash.run(PLANNER, [f"yes | head -c {SIZE}"] * COMMANDS)
        listing = await bash.one(PLANNER, "ls -l work.bin | cut -d' ' -f5")
    assert mine.stdout == "ok\n" and listing.stdout == "500000\n", listing
    assert all(r.stopped is None and r.exit_code == 0 for r in results), [
        r.stopped for r in results
    ]  # COMMANDS x SIZE is past the quota: without the cut the quota stopped them
    newest = saved_file(scratch, results[-1].stdout_ref)
    assert newest.stat().st_size == SIZE
    assert not saved_file(scratch, results[0].stdout_ref).exists()
    folder = newest.parent
    held = sum(p.stat().st_blocks * 512 for p in folder.iterdir())
    assert held <= MIB + 2 * SIZE, held  # a quarter of the quota, and the newest
