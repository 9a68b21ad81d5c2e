"""Every change costs what it changed: an append keeps the old version as a prefix
reference, a small edit as its changed region, and every version still reads back,
restores, and is reached by redaction, bytes on disk included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreChange, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
ADMIN = Provenance.admin("t")
BIG = b"".join(b"line %06d of a long lessons file\n" % i for i in range(40_000))  # ~1.3 MB


def _bookkeeping(stores: MemoryStores) -> int:
    return sum(p.stat().st_size for p in stores.state_dir(STORE).rglob("*") if p.is_file())


def test_appends_to_a_big_file_store_only_what_they_add(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    first = stores.write(STORE, "log.md", BIG, provenance=ADMIN)
    before = _bookkeeping(stores)
    shas = [first.content_sha256]
    for i in range(20):
        shas.append(
            stores.append(STORE, "log.md", b"lesson %d\n" % i, provenance=ADMIN).content_sha256
        )
    grown = _bookkeeping(stores) - before
    assert grown < 20 * 4096, grown  # not 20 copies of a 1.3 MB file
    content = BIG + b"".join(b"lesson %d\n" % i for i in range(20))
    assert stores.read_bytes(STORE, "log.md") == content
    # every version reads back whole, and the oldest one restores
    for n, sha in enumerate(shas):
        assert sha is not None
        expected = BIG + b"".join(b"lesson %d\n" % i for i in range(n))
        assert stores.blob(STORE, sha) == expected
    restored = stores.restore(STORE, "log.md", shas[0] or "", provenance=ADMIN)
    assert restored.content_sha256 == shas[0]
    assert stores.read_bytes(STORE, "log.md") == BIG
    assert stores.blob(STORE, shas[-1] or "") == content


def test_a_small_edit_keeps_only_the_changed_region(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    v1 = stores.write(STORE, "log.md", BIG, provenance=ADMIN)
    before = _bookkeeping(stores)
    v2 = stores.replace(STORE, "log.md", "line 020000 of", "LINE 020000 OF", provenance=ADMIN)
    edited = BIG.replace(b"line 020000 of", b"LINE 020000 OF")
    v3 = stores.write(STORE, "log.md", edited + b"tail\n", provenance=ADMIN)
    assert _bookkeeping(stores) - before < 16 * 1024
    assert stores.blob(STORE, v1.content_sha256 or "") == BIG
    assert stores.blob(STORE, v2.content_sha256 or "") == edited
    assert stores.blob(STORE, v3.content_sha256 or "") == edited + b"tail\n"
    # compare-and-set still sees the right current version
    with pytest.raises(ApplicationError) as err:
        stores.append(STORE, "log.md", b"x", provenance=ADMIN, if_sha256=v2.content_sha256)
    assert err.value.type == "LwMemoryConflict"
    stores.append(STORE, "log.md", b"x", provenance=ADMIN, if_sha256=v3.content_sha256)


def test_a_secret_split_across_two_appends_is_blocked(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"key AKIA", provenance=ADMIN)
    with pytest.raises(ApplicationError) as err:
        stores.append(STORE, "log.md", b"Q3EGRIXTWJ7LUMEN rest\n", provenance=ADMIN)
    assert err.value.type == "LwScanBlocked" and "aws-access-key-id" in err.value.message
    assert stores.read_bytes(STORE, "log.md") == b"key AKIA"
    # a finding already stored does not block every later append
    stores.write(STORE, "old.md", b"mail jane.doe@example.com\n", provenance=ADMIN)
    ok = stores.append(STORE, "old.md", b"more\n", provenance=ADMIN)
    assert ok.findings == ()


def test_bash_append_is_committed_as_an_append(data_dir: Path, tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "log.md", BIG, provenance=ADMIN)
    upper = tmp_path / "log.md"
    upper.write_bytes(BIG + b"one more lesson\n")
    before = _bookkeeping(stores)
    bash = Provenance(workflow_id="run_notes@1", activity_type="lw.bash", role="planner")
    result = stores.commit_staged(STORE, [StoreChange("log.md", "write", upper)], bash)
    assert result.applied
    assert _bookkeeping(stores) - before < 4096
    entry = stores.audit(STORE)[-1]
    assert (entry.op, entry.bytes) == ("append", len(BIG) + 16)
    assert stores.read_bytes(STORE, "log.md") == BIG + b"one more lesson\n"
    # an upper file that changed its old bytes too is a rewrite, not an append
    upper.write_bytes(b"X" + BIG[1:] + b"one more lesson\nand another\n")
    assert stores.commit_staged(STORE, [StoreChange("log.md", "write", upper)], bash).applied
    assert stores.audit(STORE)[-1].op == "write"
    assert stores.read_bytes(STORE, "log.md") == upper.read_bytes()


def test_redaction_reaches_deltas_and_the_bytes_on_disk(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    email = "jane.doe@example.com"
    stores.write(STORE, "c.md", b"start\n", provenance=ADMIN)
    stores.append(STORE, "c.md", f"call {email}\n".encode(), provenance=ADMIN)
    for i in range(3):
        stores.append(STORE, "c.md", b"note %d\n" % i, provenance=ADMIN)
    stores.replace(STORE, "c.md", "note 1", "NOTE 1", provenance=ADMIN)
    stores.write(STORE, "c.md", b"rewritten, no address\n", provenance=ADMIN)
    result = stores.redact(STORE, "c.md", email, provenance=Provenance.admin("dpo"))
    assert result.versions_redacted and not result.current_changed
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert email.encode() not in path.read_bytes(), path
    for version in stores.versions(STORE, "c.md"):
        data = stores.blob(STORE, version.sha256)
        assert data is not None, version
        assert email.encode() not in data
    assert stores.read_bytes(STORE, "c.md") == b"rewritten, no address\n"


def test_quota_counts_kept_versions_and_says_so(data_dir: Path) -> None:
    from lw_temporal import MemoryQuota

    stores = MemoryStores(
        DataLayout.at(data_dir), quota=lambda _s: MemoryQuota(max_bytes=300_000, max_files=4)
    )
    stores.write(STORE, "a.md", b"a" * 100_000, provenance=ADMIN)
    stores.write(STORE, "a.md", b"b" * 100_000, provenance=ADMIN)  # the old one is kept
    assert stores.usage(STORE).versions >= 100_000
    with pytest.raises(ApplicationError) as err:
        stores.write(STORE, "b.md", b"c" * 100_001, provenance=ADMIN)
    assert "in kept versions" in err.value.message and "prune" in err.value.message
    assert stores.prune_versions(STORE, keep_last=1) == 1
    stores.write(STORE, "b.md", b"c" * 100_001, provenance=ADMIN)
    stores.write(STORE, "d/x.md", b"x", provenance=ADMIN)  # 4 entries: d/ is one of them
    with pytest.raises(ApplicationError) as err:
        stores.write(STORE, "e.md", b"x", provenance=ADMIN)
    assert "files and folders" in err.value.message


@pytest.mark.parametrize(
    "name", ["bad\nname.md", "tab\tname.md", "esc\x1b.md", "bad\udcffname.md", "x" * 300]
)
def test_names_a_store_refuses(data_dir: Path, name: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    with pytest.raises(ApplicationError) as err:
        stores.write(STORE, name, b"x", provenance=ADMIN)
    assert err.value.type == "LwPathRejected"
    assert not os.path.exists(stores.root(STORE))


def test_snapshot_id_follows_the_tree(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    empty = stores.snapshot_id(STORE)
    stores.write(STORE, "a.md", b"1", provenance=ADMIN)
    one = stores.snapshot_id(STORE)
    stores.write(STORE, "b.md", b"2", provenance=ADMIN)
    stores.delete(STORE, "b.md", provenance=ADMIN)
    assert stores.snapshot_id(STORE) == one != empty
    stores.recount(STORE)  # recomputed from the files: the same id
    assert stores.snapshot_id(STORE) == one


def test_a_mutation_adds_records_to_logs_not_files(data_dir: Path) -> None:
    """Each append is a line in the store's logs (journal, audit, version references,
    ledger), not a new file: a file costs a disk block however small it is."""
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.append(STORE, "log.md", b"first\n", provenance=ADMIN)
    planner = Provenance(workflow_id="run_notes@1", activity_type="lw.memory.append",
                         role="planner", run_id="r1", activity_id="1")  # fmt: skip

    def count() -> int:
        return sum(1 for p in data_dir.rglob("*") if p.is_file())

    before = count()
    for i in range(10):
        provenance = planner.model_copy(update={"activity_id": str(i + 2)})
        stores.append(STORE, "log.md", b"line %d\n" % i, provenance=provenance)
    assert count() == before
