"""Every group a command holds has a name on both backends. Under Landlock a root
worker's command holds the range's shared group and its stores' groups beside its own,
and the generated ``/etc/group`` named none of them: ``groups`` and ``id -Gn`` printed
"cannot find name for group ID" and failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._accounts import nss_wrapper
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@groups"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_groups_and_id_name_every_group(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    if sandbox == "landlock" and nss_wrapper() is None:
        pytest.skip("needs libnss-wrapper (the Makefile's system-deps installs it)")
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    store = plugin.config.layout.root / "memory" / "workflows" / "cr"
    store.mkdir(parents=True)
    (store / "notes.md").write_text("seeded\n")
    async with bash_worker(dev_env, plugin) as bash:
        named, numbers = await bash.run(PLANNER, ["groups && id -Gn", "id -G"])
    assert named.exit_code == 0 and named.stderr == "", named
    first, second = named.stdout.splitlines()
    assert first == second and first.split()[0] == "agent", named.stdout
    assert len(first.split()) == len(numbers.stdout.split()), (named.stdout, numbers.stdout)
