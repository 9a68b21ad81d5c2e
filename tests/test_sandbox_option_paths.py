"""A path given as an option's value (``--file=/mnt/...``, ``dd if=... of=...``) reaches
the same folder on both backends. Without a mount namespace (Landlock) the command
line's ``/mnt/...``, ``/tmp`` and generated ``/etc`` words are mapped to the real
folders, but only whole words were: ``grep --file=/mnt/scratch/own/f`` failed there,
with a hint to pass the path on the command line, which it already was."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._accounts import nss_wrapper
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@options"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_option_values_name_the_agents_folders(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    if sandbox == "landlock" and nss_wrapper() is None:
        pytest.skip("needs libnss-wrapper (the Makefile's system-deps installs it)")
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    async with bash_worker(dev_env, plugin) as bash:
        results = await bash.run(
            PLANNER,
            [
                "echo seeded > f; grep --file=/mnt/scratch/own/f f",
                "dd if=/mnt/scratch/own/f of=/tmp/g status=none && cat /tmp/g",
                "cp --target-directory=/tmp f && cat /tmp/f",
                'grep -c "--regexp=seeded" "--file=/mnt/scratch/own/f" f',
                "grep -c --file=/etc/hosts /etc/hosts",
            ],
        )
    for result in results:
        assert result.exit_code == 0 and result.hint is None, result
    assert [r.stdout for r in results] == ["seeded\n", "seeded\n", "seeded\n", "1\n", "3\n"]
