"""A file another writer changes while a bash command runs is not overwritten by what
the command made of the earlier content: the command's memory changes are refused
whole, saying which path moved and by whom, and the other change stays. A command
that finds nothing moved commits as before.

Before the fix the command's commit replaced the other writer's change without a word
(a `write` through the API and an `append` both lost; the `>>` itself was then stored
as a rewrite)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef

from ._bash_support import bash_worker

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
M = "/mnt/memory/workflow"


async def test_a_change_made_while_the_command_ran_is_not_overwritten(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    seed = Provenance.admin("seed")
    plugin.memory.write(STORE, "f.md", b"old\n", provenance=seed)
    plugin.memory.write(STORE, "g.md", b"old\n", provenance=seed)
    started = threading.Event()

    def other_writer() -> None:  # once the command has read both files
        deadline = time.monotonic() + 60
        while not list((data_dir / "runs").rglob("read-them")):
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        started.set()
        plugin.memory.write(STORE, "f.md", b"api wrote this\n", provenance=Provenance.admin("api"))
        plugin.memory.append(STORE, "g.md", b"api appended\n", provenance=Provenance.admin("api"))
        (data_dir / "api-done").touch()

    writer = threading.Thread(target=other_writer)
    writer.start()
    async with bash_worker(dev_env, plugin, task_queue) as runner:
        raced, later = await runner.run(
            f"run_notes@{task_queue}",
            [
                f"v=$(cat {M}/f.md); echo x >> {M}/g.md; touch /mnt/scratch/own/read-them; "
                f'sleep 4; echo "$v bash" > {M}/f.md',
                f"echo x >> {M}/g.md",
            ],
        )
    writer.join()
    assert started.is_set() and (data_dir / "api-done").exists()

    assert raced.exit_code == 0
    refused = "\n".join(raced.memory_refused)
    assert not raced.memory_changes, raced
    assert "f.md was changed by admin api" in refused and "run it again" in refused
    assert plugin.memory.read(STORE, "f.md").content == "api wrote this\n"
    # the next command starts from what is there now, and commits
    assert later.memory_changes and not later.memory_refused, later
    assert plugin.memory.read(STORE, "g.md").content == "old\napi appended\nx\n"
    ops = [(e.op, e.path, e.actor) for e in plugin.memory.audit(STORE)]
    assert ops[-1] == ("append", "g.md", None)
    assert [o for o in ops if o[2] is None] == [("append", "g.md", None)]
