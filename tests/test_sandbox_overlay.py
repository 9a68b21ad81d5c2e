"""Writable memory is staged through an overlay and committed after the command:
writes, deletes, replaced folders and refusals, as seen in the store and the result."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal._sandbox import collect_changes
from tests._bash_support import bash_worker, staging_folder

PLANNER = "run_cr@1"
STEP = "run_cr@1/steps/step_1"


@pytest.fixture
def plugin(data_dir: Path) -> LittleWorkflowPlugin:
    return LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")])


@pytest.fixture
def store(plugin: LittleWorkflowPlugin) -> Path:
    path = plugin.data_dir / "memory" / "workflows" / "cr"
    (path / "old").mkdir(parents=True)
    (path / "old" / "a.md").write_text("a\n")
    (path / "keep.md").write_text("keep\n")
    (path / "gone.md").write_text("gone\n")
    return path


async def test_planner_writes_are_committed_to_the_store(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(
            PLANNER,
            "cd /mnt/memory/workflow && echo new > lessons.md && echo more >> keep.md"
            " && rm gone.md && rm -r old && mkdir old && echo b > old/b.md"
            " && mkdir -p deep/er && touch keep.md && ln -s /etc link",
        )
    assert result.exit_code == 0, result.stderr
    assert (store / "lessons.md").read_text() == "new\n"
    assert (store / "keep.md").read_text() == "keep\nmore\n"
    assert not (store / "gone.md").exists()
    assert sorted(p.name for p in (store / "old").iterdir()) == ["b.md"]
    assert (store / "deep" / "er").is_dir()
    assert not (store / "link").exists() and not (store / "link").is_symlink()
    kinds = {(c.path, c.kind) for c in result.memory_changes}
    assert ("/mnt/memory/workflow/lessons.md", "write") in kinds
    assert ("/mnt/memory/workflow/gone.md", "delete") in kinds
    assert ("/mnt/memory/workflow/old", "delete") in kinds
    assert ("/mnt/memory/workflow/old/b.md", "write") in kinds
    assert all(c.store == "workflow:cr" for c in result.memory_changes)
    assert result.memory_refused == (
        "/mnt/memory/workflow/link: symlinks are not kept in memory; copy the file",
    )
    assert not any(staging_folder(plugin).iterdir())


async def test_reading_memory_changes_nothing_and_workers_cannot_write(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        read = await bash.one(PLANNER, "cat /mnt/memory/workflow/keep.md; ls /mnt/memory/workflow")
        step = await bash.one(STEP, 'd=/mnt/memory/workflow; echo x > "$d/keep.md"')
    assert read.stdout == "keep\ngone.md\nkeep.md\nold\n" and read.memory_changes == ()
    assert step.exit_code != 0 and "Read-only file system" in step.stderr
    assert (store / "keep.md").read_text() == "keep\n"


async def test_a_timed_out_command_commits_nothing(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(
            PLANNER, "echo half > /mnt/memory/workflow/half.md; sleep 60", timeout_seconds=1
        )
    assert result.timed_out
    assert result.memory_refused == ("memory changes discarded: the command timed out",)
    assert not (store / "half.md").exists()


async def test_missing_store_is_created_on_first_write(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin
) -> None:
    store = plugin.data_dir / "memory" / "workflows" / "cr"
    async with bash_worker(dev_env, plugin) as bash:
        listing = await bash.one(PLANNER, "ls -A /mnt/memory/workflow")
        assert listing.exit_code == 0 and listing.stdout == ""
        assert not store.exists()
        await bash.one(PLANNER, "echo first > /mnt/memory/workflow/first.md")
    assert (store / "first.md").read_text() == "first\n"


def test_change_collection_walks_only_the_upper_dir(tmp_path: Path) -> None:
    lower, upper = tmp_path / "lower", tmp_path / "upper"
    lower.mkdir()
    for i in range(3000):
        (lower / f"note-{i}.md").write_text("x")
    upper.mkdir()
    (upper / "note-7.md").write_text("changed")
    (upper / "note-8.md").write_text("x")  # copied up without a content change
    changes, refused = collect_changes(upper, lower)
    assert [(c.path, c.kind) for c in changes] == [("note-7.md", "write")]
    assert refused == []


async def test_idle_staging_is_reused_and_never_carries_a_change_over(
    dev_env: WorkflowEnvironment, plugin: LittleWorkflowPlugin, store: Path
) -> None:
    staging = staging_folder(plugin)
    async with bash_worker(dev_env, plugin) as bash:
        reads = await bash.run(PLANNER, ["cat /mnt/memory/workflow/keep.md"] * 4)
        assert [r.stdout for r in reads] == ["keep\n"] * 4
        # Commands that wrote nothing share one idle staging set.
        assert len(list(staging.iterdir())) == 1
        wrote, after, removed, last = await bash.run(
            PLANNER,
            [
                "echo fresh > /mnt/memory/workflow/fresh.md",
                "ls -A /mnt/memory/workflow",
                "rm /mnt/memory/workflow/fresh.md",
                "ls -A /mnt/memory/workflow",
            ],
        )
    assert wrote.exit_code == 0 and wrote.memory_changes
    assert after.stdout.split() == ["fresh.md", "gone.md", "keep.md", "old"]
    assert removed.memory_changes and not (store / "fresh.md").exists()
    assert last.stdout.split() == ["gone.md", "keep.md", "old"]
    # A staging set that held changes is removed, never handed to the next command.
    for folder in staging.iterdir():
        assert not any((folder / "upper").iterdir())


async def test_a_data_dir_with_overlay_option_separators_works(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # The overlay's layers are named relative to, or through a descriptor of, its
    # staging folder, so a data dir whose path holds ',' ':' or '\\' needs no escaping
    # (and no host path is shown).
    odd = tmp_path / "data,dir:x\\y"
    odd.mkdir()
    odd.chmod(0o755)
    plugin = LittleWorkflowPlugin(odd, [WorkflowDefinition(id="cr")])
    async with bash_worker(dev_env, plugin) as bash:
        result = await bash.one(
            PLANNER, "echo new > /mnt/memory/workflow/new.md && cat /proc/self/mountinfo"
        )
    assert result.exit_code == 0, result
    assert [c.path for c in result.memory_changes] == ["/mnt/memory/workflow/new.md"]
    assert (odd / "memory" / "workflows" / "cr" / "new.md").read_text() == "new\n"
    overlay = [line for line in result.stdout.splitlines() if " /mnt/memory/workflow " in line]
    assert overlay and re.search(
        r"lowerdir=(/proc/self/fd/\d+/)?lower,upperdir=\1upper,workdir=\1work,", overlay[0]
    ), overlay
    assert str(odd) not in overlay[0]
