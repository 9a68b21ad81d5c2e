"""A rename is checked against the store's quota like any commit: it keeps the old
name's last version, adds audit and ledger lines, and may make folders. Unchecked, a
full store (20,000 bytes) took 600 renames back and forth and grew to 770,000 bytes,
and a rename into new folders passed ``max_files``."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal import MemoryQuota
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "full")
WHO = Provenance(actor="test")


def _total(stores: MemoryStores) -> int:
    usage = stores.usage(STORE)
    return usage.live + usage.versions + usage.index + usage.bookkeeping


def test_renames_cannot_grow_a_full_store(tmp_path: Path) -> None:
    quota = MemoryQuota(max_bytes=20_000, max_files=100, max_file_bytes=1_000)
    stores = MemoryStores(DataLayout.at(tmp_path), quota=lambda _store: quota)
    with pytest.raises(ApplicationError):  # fill it: rewrites until the quota refuses
        for i in range(1_000):
            stores.write(STORE, "a.md", b"%04d" % i * 100, provenance=WHO)
    full = _total(stores)
    accepted = 0
    for _ in range(50):
        try:
            stores.rename(STORE, "a.md", "b.md", provenance=WHO)
            stores.rename(STORE, "b.md", "a.md", provenance=WHO)
            accepted += 2
        except ApplicationError as refused:
            assert refused.type == "LwQuotaExceeded"
            break
    assert _total(stores) <= max(full, quota.max_bytes) + 4_000, (accepted, _total(stores))
    stores.delete(STORE, "a.md" if stores.read(STORE, "a.md").exists else "b.md", provenance=WHO)


def test_a_rename_into_new_folders_counts_them(tmp_path: Path) -> None:
    quota = MemoryQuota(max_bytes=10**8, max_files=3, max_file_bytes=1_000)
    stores = MemoryStores(DataLayout.at(tmp_path), quota=lambda _store: quota)
    stores.write(STORE, "a.md", b"a", provenance=WHO)
    stores.write(STORE, "b.md", b"b", provenance=WHO)
    with pytest.raises(ApplicationError) as refused:
        stores.rename(STORE, "a.md", "x/y/z/a.md", provenance=WHO)
    assert refused.value.type == "LwQuotaExceeded"
    assert stores.read(STORE, "a.md").exists
    assert not (tmp_path / "memory/workflows/full/x").exists()
    stores.rename(STORE, "a.md", "c.md", provenance=WHO)  # a plain rename still fits
    assert stores.read(STORE, "c.md").exists
