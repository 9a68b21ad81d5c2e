"""A holder of a store's lock commits the requests other processes spool while it
commits its own batch, in the same hold, and answers them before it lets go: they do
not wait for the lock to pass to another process (or back to their own) first. With
four processes appending to one store, each such pass cost every waiting process a
wake-up and a look at the lock."""

from __future__ import annotations

import re
from pathlib import Path

from lw_temporal import MemoryQuota
from lw_temporal._scan import DefaultScanner, Rule
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._fileops import FileOp
from lw_temporal.memory._spool import Spool

STORE = StoreRef(StoreKind.ORG, "org")


def _activity(activity_id: str) -> Provenance:
    return Provenance(
        namespace="default", workflow_id="run_late@1", workflow_type="lw.Planner",
        run_id="r1", activity_id=activity_id, activity_type="lw.memory.append", attempt=1,
        role="planner",
    )  # fmt: skip


def test_a_request_spooled_during_a_batch_is_committed_in_the_same_hold(
    data_dir: Path,
) -> None:
    spooled: list[tuple[Spool, str]] = []
    stores: MemoryStores

    def another_process_spools(text: str) -> bool:
        """Runs while the holder plans its batch (the scan of what it appends): the
        moment another process finds the lock held and spools its request."""
        if "TRIGGER" in text and not spooled:
            fingerprint = stores._writer.fingerprint
            assert fingerprint is not None
            spool = Spool(stores.state_dir(STORE), fingerprint)
            op = FileOp("append", "late.md", "late.md", b"late line\n")
            spooled.append((spool, spool.submit(op, _activity("late-1"), MemoryQuota())))
        return False

    trigger = Rule("trigger", "pii", False, re.compile(r"(?!)"), hint=another_process_spools)
    stores = MemoryStores(DataLayout.at(data_dir), scanner=DefaultScanner(extra_rules=[trigger]))
    stores.append(STORE, "warm.md", b"first\n", provenance=_activity("warm-1"))

    stores.append(STORE, "mine.md", b"TRIGGER\n", provenance=_activity("mine-1"))

    (spool, rid) = spooled[0]
    outcome = spool.outcome(rid)  # written before the holder let go of the lock
    assert outcome is not None and "ok" in outcome, outcome
    assert stores.read_bytes(STORE, "late.md") == b"late line\n"
    assert stores.read_bytes(STORE, "mine.md") == b"TRIGGER\n"
    audited = [str(e.activity_id) for e in stores.audit(STORE) if e.path in ("late.md", "mine.md")]
    assert sorted(audited) == ["late-1", "mine-1"]
