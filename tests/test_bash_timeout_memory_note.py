"""A planner's command that times out without touching memory says nothing about
memory: its result listed "memory changes discarded: the command timed out" in
``memory_refused`` whenever the agent had a writable memory mount (under bwrap), so
every timeout read as lost memory work. One that did write memory still says its
changes were discarded, and none is kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from tests._bash_support import SANDBOXES, bash_worker

PLANNER = "run_cr@timeout-note"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_timeout_names_only_memory_it_changed(
    dev_env: WorkflowEnvironment, data_dir: Path, sandbox: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="cr")], sandbox=sandbox)
    store = plugin.config.layout.root / "memory" / "workflows" / "cr"
    store.mkdir(parents=True)
    (store / "notes.md").write_text("notes\n")
    async with bash_worker(dev_env, plugin) as bash:
        idle = await bash.one(
            PLANNER, "cat /mnt/memory/workflow/notes.md; sleep 30", timeout_seconds=1
        )
        wrote = None
        if sandbox == "bwrap":  # Landlock refuses bash writes to memory before they run
            wrote = await bash.one(
                PLANNER, "echo half > /mnt/memory/workflow/half.md; sleep 30", timeout_seconds=1
            )
    assert idle.timed_out and idle.stdout == "notes\n"
    assert idle.memory_refused == () and idle.memory_refused_count == 0, idle
    assert "memory" not in idle.stderr, idle.stderr
    if wrote is not None:
        assert wrote.timed_out
        assert wrote.memory_refused == ("memory changes discarded: the command timed out",)
        assert not (store / "half.md").exists()
