"""Group commit across processes: worker processes appending to one store on one data
dir share journal flushes (a process that finds the lock held leaves its append in the
store's spool and the holder commits it with its own batch), and still every append
lands exactly once, with its audit line, and each process gets its own result."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _journal

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
PROCS, COUNT = 4, 50


def _provenance(proc: int, i: int) -> Provenance:
    """What an ``lw.memory.append`` activity passes: an idempotency key per activity."""
    return Provenance(
        namespace="default",
        workflow_id=f"run_notes@p{proc}",
        workflow_type="lw.Planner",
        run_id=f"r{proc}",
        activity_id=str(i),
        activity_type="lw.memory.append",
        attempt=1,
        role="planner",
    )


def _appender(data_dir: str, proc: int, start: Any, report: Any) -> None:
    """Append COUNT lines; report (own flushes, commits in them, results seen)."""
    flushes: list[int] = []
    original = _journal.Journal.commit

    def counted(self: Any, record: Any) -> int:
        flushes.append(len(record["commits"]))
        return original(self, record)

    _journal.Journal.commit = counted  # type: ignore[method-assign]
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, f"warm-{proc}.md", b"w\n", provenance=_provenance(proc, 1000))
    start.wait()
    results = []
    for i in range(COUNT):
        line = f"p{proc} i{i}\n".encode()
        result = stores.append(STORE, "shared.md", line, provenance=_provenance(proc, i))
        assert not result.replayed and result.op == "append", result
        results.append(result.content_sha256)
    report.put((proc, len(flushes) - 1, sum(flushes) - 1, len(set(results))))


def test_appends_from_four_processes_share_flushes_and_land_once(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    ctx = multiprocessing.get_context("spawn")
    start, report = ctx.Barrier(PROCS), ctx.Queue()
    procs = [
        ctx.Process(target=_appender, args=(str(data_dir), p, start, report)) for p in range(PROCS)
    ]
    for p in procs:
        p.start()
    reports = [report.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0

    # every line once, each with exactly one audit line
    lines = stores.read(STORE, "shared.md").content.splitlines()
    assert sorted(lines) == sorted(f"p{p} i{i}" for p in range(PROCS) for i in range(COUNT))
    audit = stores.audit(STORE, path="shared.md")
    keys = [(e.workflow_id, e.activity_id) for e in audit if e.op == "append"]
    assert len(keys) == PROCS * COUNT == len(set(keys))
    # each process saw a result per append (distinct contents: the file grew each time)
    assert all(seen == COUNT for _, _, _, seen in reports)
    # the flushes were shared: fewer than one per append, some carrying other processes'
    flushes = sum(f for _, f, _, _ in reports)
    commits = sum(c for _, _, c, _ in reports)
    assert commits == PROCS * COUNT, reports
    assert flushes < commits, reports
    # no request, claim or outcome is left in the spool (only the processes' reusable
    # spare files), and a retry of any append is answered from the ledger
    spool = stores.state_dir(STORE) / "spool"
    left = [] if not spool.exists() else [p.name for p in spool.iterdir()]
    assert [name for name in left if not name.endswith(".spare")] == []
    # each process had one request in flight at a time: its two files, reused
    assert len(left) <= 2 * PROCS, left
    again = stores.append(STORE, "shared.md", b"p0 i7\n", provenance=_provenance(0, 7))
    assert again.replayed
    assert stores.recount(STORE)["files"] == 1 + PROCS
