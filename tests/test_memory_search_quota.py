"""A store's search index counts toward its byte quota once a search has made it: a
write that grows a store the index took over its quota is refused, saying how much is
index; shrinking is still allowed; a store never searched pays nothing for search."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal import MemoryQuota
from lw_temporal.errors import QUOTA_EXCEEDED
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "tight")
ADMIN = Provenance.admin("seed")
QUOTA = MemoryQuota(max_bytes=300_000, max_files=1000, max_file_bytes=100_000)


def test_the_index_counts_toward_the_quota(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir), quota=lambda _store: QUOTA)
    note = "".join(f"line {i} about sparrows, finches and wrens {i * 7}\n" for i in range(400))
    for n in range(7):
        stores.write(STORE, f"birds-{n}.md", note.encode(), provenance=ADMIN)
    unsearched = stores.usage(STORE)
    assert unsearched.index == 0 and unsearched.bytes < QUOTA.max_bytes

    assert stores.search(STORE, "finches").hits
    usage = stores.usage(STORE)
    assert usage.index == stores.files(STORE).search.disk_bytes() > 0
    assert usage.bookkeeping == stores.files(STORE).bookkeeping_bytes() > 0  # its records
    total = usage.live + usage.versions + usage.index + usage.bookkeeping
    assert usage.bytes == total > QUOTA.max_bytes

    with pytest.raises(ApplicationError) as refused:
        stores.append(STORE, "birds-0.md", b"one more wren\n", provenance=ADMIN)
    assert refused.value.type == QUOTA_EXCEEDED
    assert "in its search index" in refused.value.message
    assert b"one more wren" not in (stores.read_bytes(STORE, "birds-0.md") or b"")

    stores.delete(STORE, "birds-6.md", provenance=ADMIN)  # cleaning up is allowed
    assert all(h.path != "birds-6.md" for h in stores.search(STORE, "finches", limit=50).hits)
