"""After a planner's command, the thread that ran it keeps a fresh overlay of the same
store mounted for the next one (armed): that command sees the store as it is when it
starts, never as it was when the overlay was mounted, and the host never sees it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox._threadmounts import ThreadMounts
from tests._bash_support import bash_worker
from tests._sandbox_support import host_overlays

PLANNER = "run_cr@1"
LIST = "cd /mnt/memory/workflow && cat keep.md && ls"


@pytest.fixture
def plugin(data_dir: Path) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])


@pytest.fixture
def store(plugin: LittleWorkflowPlugin) -> Path:
    path = plugin.data_dir / "memory" / "workflows" / "cr"
    path.mkdir(parents=True)
    (path / "keep.md").write_text("keep\n")
    (path / "gone.md").write_text("gone\n")
    return path


def armed() -> int:
    mounts = ThreadMounts.existing()
    return 0 if mounts is None else len(mounts._armed)


async def test_an_armed_overlay_shows_the_store_as_it_is_when_the_command_starts(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        first = await bash.one(PLANNER, LIST)
        assert first.stdout == "keep\ngone.md\nkeep.md\n"
        assert armed() >= 1  # the next command of this store need not wait for a mount
        # the store changes meanwhile, as another command's commit changes it
        (store / "keep.md").write_text("changed\n")
        (store / "gone.md").unlink()
        (store / "new").mkdir()
        (store / "new" / "n.md").write_text("n\n")
        second = await bash.one(PLANNER, LIST + " && cat new/n.md && echo w > w.md")
    assert second.exit_code == 0, second.stderr
    assert second.stdout == "changed\nkeep.md\nnew\nn\n"
    assert (store / "w.md").read_text() == "w\n"
    assert not host_overlays()


async def test_a_replaced_store_folder_is_mounted_anew(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        await bash.one(PLANNER, LIST)
        assert armed() >= 1
        fresh = store.with_name("cr.fresh")
        fresh.mkdir()
        (fresh / "keep.md").write_text("fresh\n")
        os.rename(store, store.with_name("cr.old"))
        os.rename(fresh, store)
        second = await bash.one(PLANNER, LIST)
    assert second.stdout == "fresh\nkeep.md\n"


async def test_a_command_that_wrote_memory_leaves_nothing_armed_on_its_folder(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        before = armed()
        wrote = await bash.one(PLANNER, "echo x > /mnt/memory/workflow/x.md")
        assert wrote.memory_changes_count == 1
        assert armed() <= before  # its staging folder was removed, not armed
        again = await bash.one(PLANNER, LIST)
    assert again.stdout == "keep\ngone.md\nkeep.md\nx.md\n"
    assert not host_overlays()
