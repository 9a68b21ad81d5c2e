"""A write of ``d/x.md`` makes the folder ``d/``, and ``max_files`` counts files and
folders alike: the folder must be counted when the write makes it, since removing it
counts it out. Uncounted, each write-then-remove of a new folder lowered the store's
folder count by one for good, so a store with ``max_files=3`` took any number of files.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal import MemoryQuota
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "small")
WHO = Provenance(actor="test")


def _counts(stores: MemoryStores) -> tuple[int, int]:
    usage = stores.usage(STORE)
    return usage.files, usage.dirs


def _recounted(stores: MemoryStores) -> tuple[int, int]:
    stores.recount(STORE)
    return _counts(stores)


def test_folders_made_by_writes_are_counted(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    stores.write(STORE, "a/b/c/x.md", b"x", provenance=WHO)
    assert _counts(stores) == (1, 3)
    stores.write(STORE, "a/b/y.md", b"y", provenance=WHO)
    stores.append(STORE, "a/e/z.md", b"z", provenance=WHO)
    stores.rename(STORE, "a/b", "f/g", provenance=WHO)
    found = _counts(stores)
    assert found == _recounted(stores)
    stores.delete(STORE, "f", recursive=True, provenance=WHO)
    stores.delete(STORE, "a", recursive=True, provenance=WHO)
    assert _counts(stores) == (0, 0) == _recounted(stores)


def test_concurrent_writes_into_one_new_folder_count_it_once(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(lambda i: stores.write(STORE, f"new/n{i}.md", b"n", provenance=WHO), range(16))
        )
    assert _counts(stores) == (16, 1) == _recounted(stores)


def test_removing_written_folders_does_not_free_the_file_quota(tmp_path: Path) -> None:
    quota = MemoryQuota(max_bytes=10**8, max_files=3, max_file_bytes=100)
    stores = MemoryStores(DataLayout.at(tmp_path), quota=lambda _store: quota)
    for i in range(10):
        stores.write(STORE, f"d{i}/x.md", b"1", provenance=WHO)
        stores.delete(STORE, f"d{i}", recursive=True, provenance=WHO)
    for i in range(3):
        stores.write(STORE, f"f{i}.md", b"1", provenance=WHO)
    with pytest.raises(ApplicationError) as refused:
        stores.write(STORE, "f3.md", b"1", provenance=WHO)
    assert refused.value.type == "LwQuotaExceeded"
    assert sorted(p.name for p in (tmp_path / "memory/workflows/small").iterdir()) == [
        "f0.md", "f1.md", "f2.md",
    ]  # fmt: skip
