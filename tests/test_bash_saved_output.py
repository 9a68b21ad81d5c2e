"""A result whose output is saved behind ``stdout_ref`` says when that file does not
hold the whole stream: past the saved cap (64 MiB by default) the rest was dropped
without a word, and a saved file the scratch quota removed (the largest thing the
command wrote: a big output is) was still named as the whole output."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.options import BashOptions, Limits
from tests._bash_support import SANDBOXES, bash_worker, saved_file

PLANNER = "run_cr@saved"
MIB = 1 << 20


def _saved(plugin: LittleWorkflowPlugin, ref: str | None) -> Path:
    return saved_file(plugin.config.scope_of(PLANNER, "lw.Planner").own_scratch, ref)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_saved_output_says_what_it_lacks(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(
        data_dir,
        [WorkflowDefinition(id="cr")],
        sandbox=sandbox,
        bash=BashOptions(limits=Limits(writable_bytes=4 * MIB)),
    )
    plugin.bash_activities.saved_output_cap = 200_000
    async with bash_worker(dev_env, plugin) as bash:
        whole, cut = await bash.run(PLANNER, ["yes | head -c 150000", "yes | head -c 300000"])
        plugin.bash_activities.saved_output_cap = 64 * MIB
        removed = await bash.one(PLANNER, "yes | head -c 6000000")

    assert whole.stdout_truncated and whole.stdout_bytes == 150_000
    assert _saved(plugin, whole.stdout_ref).stat().st_size == 150_000
    assert "lw.bash" not in whole.stderr, whole.stderr

    assert cut.stdout_bytes == 300_000
    assert _saved(plugin, cut.stdout_ref).stat().st_size == 200_000
    assert cut.stderr.endswith(
        f"lw.bash: stdout was 300000 bytes: only its first 200000 are saved in "
        f"{cut.stdout_ref} (BashActivities saved_output_cap); "
        "write a large output to a file instead\n"
    ), cut.stderr

    assert removed.stdout_bytes == 6_000_000 and removed.stopped is not None, removed
    assert not _saved(plugin, removed.stdout_ref).exists()
    assert f"lw.bash: stdout is not saved: {removed.stdout_ref} is gone" in removed.stderr
    assert removed.stderr.endswith(f"lw.bash: {removed.stopped}\n"), removed.stderr  # last
