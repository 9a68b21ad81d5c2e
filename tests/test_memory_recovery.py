"""A worker process that dies inside a commit leaves no half-made change: after the
journal flush (the commit point) the next lock holder rolls it forward, once, audit
line and idempotency record included; a torn journal line (a crash inside its write)
was never committed and is dropped."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _journal, _ledger

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


def _die_in_commit(data_dir: str, where: str) -> None:
    """Append, and kill this process at ``where`` inside the commit."""
    original_commit = _journal.Journal.commit
    original_audit = _ledger.AuditLog.append

    def commit(self: Any, record: Any) -> int:
        end = original_commit(self, record)
        if where == "after-journal":
            os._exit(9)
        return end

    def audit(self: Any, entries: Any) -> None:
        original_audit(self, entries)
        if where == "after-audit":
            os._exit(9)

    _journal.Journal.commit = commit  # type: ignore[method-assign]
    _ledger.AuditLog.append = audit  # type: ignore[method-assign]
    MemoryStores(DataLayout.at(data_dir)).append(STORE, "log.md", b"second\n", provenance=PROV)


@pytest.mark.parametrize("where", ["after-journal", "after-audit"])
def test_crash_inside_commit_is_rolled_forward_once(data_dir: Path, where: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"first\n", provenance=Provenance.admin("seed"))
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_die_in_commit, args=(str(data_dir), where))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 9
    journal = _journal.Journal(stores.state_dir(STORE))
    assert journal.pending() is not None  # committed, not (wholly) applied

    # the retried activity asks the ledger first: recovery completes the commit
    record = stores.recorded(STORE, PROV.model_copy(update={"attempt": 2}))
    assert record is not None and record.op == "append"
    assert stores.read(STORE, "log.md").content == "first\nsecond\n"
    appends = [e for e in stores.audit(STORE) if e.workflow_id == "run_notes@1"]
    assert len(appends) == 1 and appends[0].attempt == 1
    assert journal.pending() is None
    # and a retry through the API returns the recorded result without appending
    again = stores.append(STORE, "log.md", b"second\n", provenance=PROV)
    assert again.replayed
    assert stores.read(STORE, "log.md").content == "first\nsecond\n"
    assert stores.recount(STORE) == {"bytes": 13, "files": 1}


def test_crash_before_the_journal_leaves_nothing(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "a.md", b"v1", provenance=Provenance.admin("seed"))
    journal = _journal.Journal(stores.state_dir(STORE))
    with journal.path.open("ab") as torn:
        torn.write(b'{"commits": [{"op_id": "torn", "ops": [')
    stores.write(STORE, "b.md", b"v1", provenance=Provenance.admin("seed"))
    assert b"torn" not in journal.path.read_bytes()
    assert stores.read(STORE, "a.md").content == "v1"
    assert [e.path for e in stores.audit(STORE)] == ["a.md", "b.md"]


def test_a_new_boot_redoes_the_journal(data_dir: Path) -> None:
    """After a power loss (a new boot id) everything since the last checkpoint is
    redone: the unflushed file writes, audit lines and ledger come back, once."""
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"first\n", provenance=Provenance.admin("seed"))
    stores.append(STORE, "log.md", b"second\n", provenance=PROV)
    state = stores.state_dir(STORE)
    root = stores.root(STORE)
    (root / "log.md").write_bytes(b"first\n")  # what a lost page cache could leave
    (state / "ledger.log").rename(state / "ledger-lost.log")
    _journal.Journal(state).marker.write_text("another-boot 0")
    assert stores.recorded(STORE, PROV) is not None
    assert stores.read(STORE, "log.md").content == "first\nsecond\n"
    assert len(stores.audit(STORE)) == 2
    assert _journal.Journal(state).size() == 0  # checkpointed


def test_a_torn_bookkeeping_line_is_skipped_not_joined(data_dir: Path) -> None:
    """What a crash leaves at the end of a log (half a record) never reads as a record
    and never swallows the next one."""
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"first\n", provenance=Provenance.admin("seed"))
    ledger = stores.state_dir(STORE) / "ledger.log"
    with ledger.open("ab") as f:
        f.write(b'{"k":"abc","op":"app')
    stores.append(STORE, "log.md", b"second\n", provenance=PROV)
    record = stores.recorded(STORE, PROV)
    assert record is not None and record.op == "append"
    assert b'"op":"app\n' in ledger.read_bytes()  # ended, not joined to the next line
