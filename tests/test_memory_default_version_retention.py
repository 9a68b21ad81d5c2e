"""A store nobody gave a retention policy keeps the last 20 versions of each file, of
any age, when a pass runs (the README says so: the scheduled retention pass prunes
every store, so an admin who never set a policy must know what it keeps)."""

from __future__ import annotations

from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "kept")


def test_a_store_without_a_policy_keeps_the_last_20_versions(tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(tmp_path))
    who = Provenance(actor="test")
    for i in range(30):
        stores.write(STORE, "notes.md", f"version {i}\n".encode(), provenance=who)
    shas = [v.sha256 for v in stores.versions(STORE, "notes.md")]
    assert len(shas) == 30
    pruned = stores.apply_retention(provenance=Provenance.admin("ops"))
    assert [p.removed for p in pruned] == [10]
    kept = [sha for sha in shas if stores.blob(STORE, sha) is not None]
    assert kept == shas[-20:]
    assert stores.read(STORE, "notes.md").content == "version 29\n"
