"""Concurrent mutations of one store share their journal flushes (group commit) and
do no work twice: every append lands once, with its audit line, in fewer flushes than
appends; one conflicting with an earlier one in the batch waits for the next."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _journal

STORE = StoreRef(StoreKind.WORKFLOW, "notes")


def test_concurrent_appends_share_flushes(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    flushes: list[int] = []
    original = _journal.Journal.commit

    def counted(self: Any, record: Any) -> int:
        flushes.append(len(record["commits"]))
        return original(self, record)

    monkeypatch.setattr(_journal.Journal, "commit", counted)
    threads, per_thread = 8, 25
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        barrier.wait()
        try:
            for i in range(per_thread):
                prov = Provenance(
                    namespace="default", workflow_id="run_notes@1", run_id="r",
                    activity_id=f"{t}-{i}", attempt=1, role="planner",
                )  # fmt: skip
                stores.append(STORE, "log.md", f"t{t} i{i}\n".encode(), provenance=prov)
                if i % 5 == 0:  # a whole-content edit of the same file in the same burst
                    stores.replace(
                        STORE, "log.md", f"t{t} i{i}\n", f"T{t} I{i}\n", provenance=prov.model_copy(
                            update={"activity_id": f"{t}-{i}-r"}
                        ),
                    )  # fmt: skip
        except BaseException as err:
            errors.append(err)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    lines = Counter((stores.read_bytes(STORE, "log.md") or b"").decode().splitlines())
    expected = {
        (f"T{t} I{i}" if i % 5 == 0 else f"t{t} i{i}")
        for t in range(threads)
        for i in range(per_thread)
    }
    assert set(lines) == expected and set(lines.values()) == {1}
    mutations = threads * per_thread + threads * (per_thread // 5)
    assert sum(flushes) == mutations  # every mutation committed exactly once
    assert len(flushes) < mutations  # ... and some shared a flush
    audit = stores.audit(STORE)
    assert len(audit) == mutations and len({e.activity_id for e in audit}) == mutations
