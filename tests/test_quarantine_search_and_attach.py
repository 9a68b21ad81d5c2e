"""Held changes reach no other run by a side way: a search by an untainted run of the
same workflow finds nothing of them (the index is the store's), and a peer that
attaches the workflow's memory sees neither the file's new line in bash nor a search
hit. After the release both find it, and reading a released version taints nobody."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AttachSpec, MemoryConfig, WorkflowDefinition
from lw_temporal._taint import TaintBook
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

from ._hierarchy_support import lw_worker
from ._taint_support import NEXT, WF, command_planner, planner_id, run_planner

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
WORD = "zebracornish"
PEER = "/mnt/memory/peer-workflows/notes"


async def test_held_changes_are_not_searched_or_attached(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    notes = WorkflowDefinition(id="notes")
    peer = WorkflowDefinition(id="peer", memory=MemoryConfig(attach=(AttachSpec(id="notes"),)))
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "lessons.md", b"old lesson\n", provenance=Provenance.admin("seed"))
    model = command_planner("notes", "peer")
    search = f"memory_search {WORD}"
    look = f"cat {PEER}/lessons.md; grep -rl {WORD} /mnt/memory/ || echo no-hit{NEXT}{search}"
    async with lw_worker(dev_env, data_dir, task_queue, [notes, peer], model) as client:
        own = await run_planner(
            client, task_queue, "notes", "bad", f"echo '{WORD} lesson' >> {WF}/lessons.md"
            f"{NEXT}{search}", untrusted=True,
        )  # fmt: skip
        assert "held in quarantine" in own, own
        same = await run_planner(client, task_queue, "notes", "same", search)
        assert "0 files" in same and "lessons.md" not in same, same
        seen = await run_planner(client, task_queue, "peer", "look", look)
        assert "old lesson" in seen and "no-hit" in seen, seen
        assert f"{WORD} lesson" not in seen and "lessons.md" not in seen, seen
        assert f"{PEER}/" in seen, seen  # the peer's search did look there

        bad = planner_id(task_queue, "notes", "bad")
        assert stores.release_quarantined(bad, by="carol").applied
        same = await run_planner(client, task_queue, "notes", "after", search)
        assert "1 files" in same or "1 file" in same, same
        assert "lessons.md" in same, same
        seen = await run_planner(client, task_queue, "peer", "after", look)
        assert f"{WORD} lesson" in seen and "no-hit" not in seen, seen
        assert f"{PEER}/lessons.md" in seen.split("=====")[-1], seen
    book = TaintBook(DataLayout.at(data_dir))
    for reader in ("same", "after"):
        assert book.status(planner_id(task_queue, "notes", reader), materialize=False) is None
    assert book.status(planner_id(task_queue, "peer", "after"), materialize=False) is None
