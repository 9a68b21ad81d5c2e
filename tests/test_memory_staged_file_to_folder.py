"""A bash command may turn a file into a folder of the same name (``rm notes.md &&
mkdir notes.md``) and a folder into a file: the command's changes commit, the old
file's last version stays restorable and every step is audited.

Before the fix the file-into-folder case was refused whole ("'notes.md' is a file,
not a directory"): the write below the new folder was planned against the disk,
where the deleted file still stood."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import LittleWorkflowPlugin, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef

from ._bash_support import bash_worker

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
M = "/mnt/memory/workflow"


async def test_file_becomes_folder_and_folder_becomes_file(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, [WorkflowDefinition(id="notes")])
    seed = Provenance.admin("seed")
    plugin.memory.write(STORE, "notes.md", b"old notes\n", provenance=seed)
    plugin.memory.write(STORE, "drafts/a.md", b"draft\n", provenance=seed)
    root = data_dir / "memory/workflows/notes"
    async with bash_worker(dev_env, plugin, task_queue) as runner:
        into_folder, into_file = await runner.run(
            f"run_notes@{task_queue}",
            [
                f"rm {M}/notes.md && mkdir {M}/notes.md && echo new > {M}/notes.md/today.md",
                f"rm -r {M}/drafts && echo flat > {M}/drafts",
            ],
        )
    assert into_folder.exit_code == 0 and not into_folder.memory_refused, into_folder
    assert (root / "notes.md/today.md").read_text() == "new\n"
    assert into_file.exit_code == 0 and not into_file.memory_refused, into_file
    assert (root / "drafts").read_text() == "flat\n"

    ops = [(e.op, e.path) for e in plugin.memory.audit(STORE) if e.actor != "seed"]
    made = [("delete", "notes.md"), ("mkdir", "notes.md"), ("write", "notes.md/today.md")]
    assert ops[:3] == made
    assert ("delete", "drafts/a.md") in ops and ("write", "drafts") in ops
    old = plugin.memory.versions(STORE, "notes.md")[0]
    assert plugin.memory.blob(STORE, old.sha256) == b"old notes\n"
    assert plugin.memory.recount(STORE) == {"bytes": 9, "files": 2}
