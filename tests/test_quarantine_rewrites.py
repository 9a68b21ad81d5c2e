"""A tainted run that changes one file many times (bash, the memory tools) holds one
change for it: its latest content, against what the store had when the run first
changed it; the release writes that content once, in one audited version."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import NEXT, RESULTS, WF, cli, command_planner, planner_id, run_planner

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")


async def test_many_writes_of_one_file_are_one_held_change(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "notes.md", b"kept\n", provenance=Provenance.admin("seed"))
    stores.write(STORE, "old.md", b"to go\n", provenance=Provenance.admin("seed"))
    tainted = planner_id(task_queue, "notes", "tainted")
    commands = NEXT.join(
        [
            f"echo one >> {WF}/notes.md",
            f"echo two >> {WF}/notes.md",
            f"sed -i s/one/ONE/ {WF}/notes.md",
            f"rm {WF}/old.md && echo gone",
            f"cat {WF}/notes.md; ls {WF}",
        ]
    )
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], command_planner("notes")) as c:
        summary = await run_planner(c, task_queue, "notes", "tainted", commands, untrusted=True)
    last = summary.split(RESULTS)[-1]  # its own view: the latest content, old.md gone
    assert "kept\nONE\ntwo\nnotes.md" in last and "old.md" not in last, summary
    [held] = stores.quarantined()
    notes = next(f for f in held.files if f.path == "notes.md")
    assert (notes.change, notes.changes) == ("write", 3)
    assert next(f for f in held.files if f.path == "old.md").change == "delete"

    code, out, _ = await cli(capsys, "memory", "quarantine", "release", "--data-dir",
                             str(data_dir), "--by", "carol", tainted)  # fmt: skip
    assert code == 0, out
    assert stores.read(STORE, "notes.md").content == "kept\nONE\ntwo\n"
    assert not stores.read(STORE, "old.md").exists
    written = [e for e in stores.audit(STORE) if e.workflow_id == tainted]
    assert sorted((e.op, e.path) for e in written) == [("append", "notes.md"), ("delete", "old.md")]
