"""commit_staged: one command's changes to a store apply together or not at all, with
one audit line per file, and a retry with the same provenance returns the recorded
result (and attachment) instead of applying again."""

from __future__ import annotations

from pathlib import Path

from lw_temporal import MemoryQuota
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreChange, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
BASH = Provenance(
    namespace="default",
    workflow_id="run_notes@1",
    workflow_type="lw.Planner",
    run_id="r1",
    activity_id="7",
    activity_type="lw.bash",
    attempt=1,
    role="planner",
)


def _source(tmp: Path, name: str, content: bytes) -> Path:
    path = tmp / "upper" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_all_or_nothing(data_dir: Path, tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "keep.md", b"keep", provenance=Provenance.admin("seed"))
    stores.write(STORE, "dir/x.md", b"x", provenance=Provenance.admin("seed"))
    bad = [
        StoreChange("dir", "delete"),
        StoreChange("new.md", "write", _source(tmp_path, "new.md", b"hello")),
        StoreChange("key.pem", "write", _source(tmp_path, "key.pem",
                     b"-----BEGIN " b"EC PRIVATE KEY-----\nMHcCAQEE\n")),
        StoreChange("../escape.md", "write", _source(tmp_path, "e.md", b"x")),
    ]  # fmt: skip
    result = stores.commit_staged(STORE, bad, BASH)
    assert not result.applied
    status = {c.path: c.status for c in result.changes}
    assert status == {
        "dir": "rolled_back",
        "new.md": "rolled_back",
        "key.pem": "rejected",
        "../escape.md": "rejected",
    }
    assert sorted(r.split(":")[0] for r in result.reasons) == ["../escape.md", "key.pem"]
    root = data_dir / "memory/workflows/notes"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "dir",
        "dir/x.md",
        "keep.md",
    ]
    assert all(e.actor == "seed" for e in stores.audit(STORE))

    good = [
        StoreChange("dir", "delete"),
        StoreChange("fresh", "mkdir"),
        StoreChange("fresh/n.md", "write", _source(tmp_path, "n.md", b"note")),
        StoreChange("keep.md", "write", _source(tmp_path, "k.md", b"kept v2")),
    ]
    done = stores.commit_staged(STORE, good, BASH, attachment={"exit_code": 0})
    assert done.applied and not done.replayed
    assert (root / "fresh/n.md").read_bytes() == b"note"
    assert (root / "keep.md").read_bytes() == b"kept v2"
    assert not (root / "dir").exists()
    entries = [e for e in stores.audit(STORE) if e.actor is None]
    assert sorted((e.op, e.path) for e in entries) == [
        ("delete", "dir/x.md"),
        ("mkdir", "fresh"),
        ("rmdir", "dir"),
        ("write", "fresh/n.md"),
        ("write", "keep.md"),
    ]
    assert {(e.workflow_id, e.activity_id, e.activity_type) for e in entries} == {
        ("run_notes@1", "7", "lw.bash")
    }

    # the same activity retried: the recorded result, nothing applied again
    (root / "keep.md").unlink()
    again = stores.commit_staged(STORE, good, BASH.model_copy(update={"attempt": 2}))
    assert again.replayed and again.applied
    assert not (root / "keep.md").exists()
    record = stores.recorded(STORE, BASH)
    assert record is not None and record.attachment == {"exit_code": 0}
    assert len([e for e in stores.audit(STORE) if e.actor is None]) == 5


def test_quota_counts_the_whole_command(data_dir: Path, tmp_path: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir), quota=lambda _s: MemoryQuota(max_bytes=10))
    changes = [
        StoreChange(f"f{i}.md", "write", _source(tmp_path, f"f{i}.md", b"1234")) for i in range(3)
    ]
    result = stores.commit_staged(STORE, changes, BASH)
    assert not result.applied
    assert any("max_bytes" in (c.reason or "") for c in result.changes)
    assert not (data_dir / "memory/workflows/notes").exists()
    assert stores.commit_staged(STORE, changes[:2], BASH).applied


def test_prune_ledger_forgets_old_records_only(data_dir: Path, tmp_path: Path) -> None:
    from datetime import timedelta

    stores = MemoryStores(DataLayout.at(data_dir))
    change = [StoreChange("a.md", "write", _source(tmp_path, "a.md", b"a"))]
    stores.commit_staged(STORE, change, BASH)
    assert stores.prune_ledger(STORE, timedelta(days=1)) == 0
    assert stores.recorded(STORE, BASH) is not None
    assert stores.prune_ledger(STORE, timedelta(seconds=-1)) == 1
    assert stores.recorded(STORE, BASH) is None
