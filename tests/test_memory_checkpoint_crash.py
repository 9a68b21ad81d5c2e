"""A process killed inside a checkpoint, between emptying the journal and marking it
applied up to 0, must not make the next crashed commit vanish: the next writer that
dies after its journal flush (the commit point) is still rolled forward, once.

Before the fix the applied marker kept the old journal's end, past the new journal's
size, so the committed record read as already applied: never redone, its ledger entry
missing (a retry committed it a second time), and left in the journal for a later
power-loss recovery to replay out of order."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _journal

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
PROV = Provenance(
    namespace="default",
    workflow_id="run_notes@1",
    workflow_type="lw.Planner",
    run_id="r1",
    activity_id="3",
    activity_type="lw.memory.append",
    attempt=1,
    role="planner",
)


def _die_in_checkpoint(data_dir: str, where: str) -> None:
    """Checkpoint, and die when the journal is marked applied up to 0, just before or
    just after the mark is written."""
    original = _journal.Journal.mark

    def mark(self: Any, end: int) -> None:
        if end == 0 and where == "after-mark":
            original(self, end)
        if end == 0:
            os._exit(9)
        original(self, end)

    _journal.Journal.mark = mark  # type: ignore[method-assign]
    MemoryStores(DataLayout.at(data_dir)).empty_journal(STORE)


def _die_after_commit_point(data_dir: str, _where: str) -> None:
    original = _journal.Journal.commit

    def commit(self: Any, record: Any) -> int:
        original(self, record)
        os._exit(9)

    _journal.Journal.commit = commit  # type: ignore[method-assign]
    MemoryStores(DataLayout.at(data_dir)).append(STORE, "log.md", b"second\n", provenance=PROV)


def _run(target: Any, data_dir: Path, where: str) -> None:
    proc = multiprocessing.get_context("spawn").Process(target=target, args=(str(data_dir), where))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 9


@pytest.mark.parametrize("where", ["before-mark", "after-mark"])
def test_a_commit_after_a_killed_checkpoint_is_rolled_forward(data_dir: Path, where: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for i in range(20):  # a journal longer than the record that crashes later
        stores.append(STORE, "log.md", b"first %d\n" % i, provenance=Provenance.admin("seed"))
    seeded = stores.read(STORE, "log.md").content
    _run(_die_in_checkpoint, data_dir, where)
    _run(_die_after_commit_point, data_dir, where)

    again = MemoryStores(DataLayout.at(data_dir))
    record = again.recorded(STORE, PROV.model_copy(update={"attempt": 2}))
    assert record is not None and record.op == "append"
    assert again.read(STORE, "log.md").content == seeded + "second\n"
    retried = again.append(
        STORE, "log.md", b"second\n", provenance=PROV.model_copy(update={"attempt": 2})
    )
    assert retried.replayed
    assert again.read(STORE, "log.md").content == seeded + "second\n"
    assert [e.attempt for e in again.audit(STORE) if e.workflow_id == PROV.workflow_id] == [1]
    assert _journal.Journal(again.state_dir(STORE)).pending() is None
    assert len(again.audit(STORE)) == 21
    assert again.recount(STORE) == {"bytes": len(seeded) + 7, "files": 1}
