"""A release after the store moved on: the held changes are applied compare-and-set
against what the tainted run saw, so a path someone else changed since is a conflict,
named, and nothing of the store is applied (not even the paths that did not move);
the changes stay held for another decision."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import WorkflowDefinition
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import WF, cli, command_planner, planner_id, run_planner

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")


async def test_a_release_over_a_moved_store_applies_nothing(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "lessons.md", b"first\n", provenance=Provenance.admin("seed"))
    tainted = planner_id(task_queue, "notes", "tainted")
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], command_planner("notes")) as c:
        await run_planner(
            c, task_queue, "notes", "tainted",
            f"echo tainted >> {WF}/lessons.md && echo new > {WF}/fresh.md", untrusted=True,
        )  # fmt: skip
        # Meanwhile an untainted planner changes the same file.
        await run_planner(c, task_queue, "notes", "other", f"echo other >> {WF}/lessons.md")
    moved = stores.read(STORE, "lessons.md")
    assert moved.content == "first\nother\n"
    [held] = stores.quarantined()
    assert {f.path: f.moved for f in held.files} == {"lessons.md": True, "fresh.md": False}

    code, out, err = await cli(capsys, "memory", "quarantine", "list", "--data-dir",
                               str(data_dir))  # fmt: skip
    assert "1 moved in the store since" in out
    code, out, err = await cli(capsys, "memory", "quarantine", "release", "--data-dir",
                               str(data_dir), "--by", "carol", tainted)  # fmt: skip
    assert code == 1, (out, err)
    assert "not released: workflow:notes" in out
    assert "conflict  lessons.md: changed in the store since the run saw it" in out

    # Nothing half-applied: the file that did not move was not written either.
    assert stores.read(STORE, "lessons.md").content_sha256 == moved.content_sha256
    assert not stores.read(STORE, "fresh.md").exists
    assert [e.workflow_id for e in stores.audit(STORE)][-1] != tainted
    assert len(stores.quarantined()) == 1  # still held, for the next decision
    decisions = (data_dir / ".lw" / "audit" / "quarantine.jsonl").read_text()
    assert '"applied": false' in decisions and "changed in the store since" in decisions
