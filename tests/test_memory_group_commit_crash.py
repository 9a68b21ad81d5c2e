"""A process killed while committing other processes' spooled appends loses nothing and
corrupts nothing: its batch was flushed (the commit point), so the next lock holder
rolls it forward and answers the spooled requests it held from the idempotency
ledger; each requester gets its result once, every line is in the file once with one
audit line, and the store's figures match its disk."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _journal, _spool

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
REQUESTERS, COUNT = 2, 10


def _provenance(who: str, i: int) -> Provenance:
    return Provenance(
        namespace="default",
        workflow_id=f"run_notes@{who}",
        workflow_type="lw.Planner",
        run_id=f"r-{who}",
        activity_id=str(i),
        activity_type="lw.memory.append",
        attempt=1,
        role="planner",
    )


def _committer(data_dir: str, holding: Any) -> None:
    """Take the lock, wait until every requester has spooled its append, commit them
    all with this process's own in one flush, and die before applying or answering."""
    original_claim = _spool.Spool.claim
    original_commit = _journal.Journal.commit

    def claim(self: Any) -> Any:
        holding.set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if sum(n.endswith(".req") for n in os.listdir(self.dir)) >= REQUESTERS:
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        return original_claim(self)

    def commit(self: Any, record: Any) -> int:
        end = original_commit(self, record)
        if len(record["commits"]) > 1:
            os._exit(9)  # flushed with the others' appends, nothing applied or answered
        return end

    _spool.Spool.claim = claim  # type: ignore[method-assign]
    _journal.Journal.commit = commit  # type: ignore[method-assign]
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "shared.md", b"a0\n", provenance=_provenance("a", 0))


def _requester(data_dir: str, who: str, holding: Any, report: Any) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    assert holding.wait(timeout=120)
    results = []
    for i in range(COUNT):
        line = f"{who}{i}\n".encode()
        result = stores.append(STORE, "shared.md", line, provenance=_provenance(who, i))
        results.append((result.op, result.bytes > 0, result.replayed))
    report.put((who, results))


def test_committer_killed_mid_batch_loses_no_spooled_append(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    ctx = multiprocessing.get_context("spawn")
    holding, report = ctx.Event(), ctx.Queue()
    committer = ctx.Process(target=_committer, args=(str(data_dir), holding))
    whos = [chr(ord("b") + n) for n in range(REQUESTERS)]
    requesters = [
        ctx.Process(target=_requester, args=(str(data_dir), who, holding, report)) for who in whos
    ]
    committer.start()
    for p in requesters:
        p.start()
    committer.join(timeout=180)
    assert committer.exitcode == 9
    reports = dict(report.get(timeout=180) for _ in requesters)
    for p in requesters:
        p.join(timeout=60)
        assert p.exitcode == 0

    # every requester got a result for every append; only the first (the one the
    # dead process had flushed) may be answered from the ledger
    for who in whos:
        results = reports[who]
        assert len(results) == COUNT and all(op == "append" and grew for op, grew, _ in results)
        assert not any(replayed for _, _, replayed in results[1:])
    # the dead batch was rolled forward once: its own line too, though never answered
    content = stores.read(STORE, "shared.md").content
    expected = ["a0", *(f"{who}{i}" for who in whos for i in range(COUNT))]
    assert sorted(content.splitlines()) == sorted(expected)
    keys = [(e.workflow_id, e.activity_id) for e in stores.audit(STORE) if e.op == "append"]
    assert len(keys) == len(expected) == len(set(keys))
    # nothing half-made: journal applied, no request, claim or outcome left in the
    # spool (only the requesters' spare files, which they reuse), figures match the disk
    assert _journal.Journal(stores.state_dir(STORE)).pending() is None
    spool = stores.state_dir(STORE) / "spool"
    left = [] if not spool.exists() else [p.name for p in spool.iterdir()]
    assert [name for name in left if not name.endswith(".spare")] == []
    # each process had one request in flight at a time: its two files, reused
    assert len(left) <= 2 * REQUESTERS, left
    assert stores.recount(STORE) == {"bytes": len(content.encode()), "files": 1}
    # a retry of the dead process's own append finds it committed
    again = stores.append(STORE, "shared.md", b"a0\n", provenance=_provenance("a", 0))
    assert again.replayed
