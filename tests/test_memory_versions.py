"""Earlier versions are kept outside the mounted folders, listed and restored; a
redaction removes matched content from the file and from every kept version, and is
audited with its actor."""

from __future__ import annotations

from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
ADMIN = Provenance.admin("alice")


def test_versions_listed_and_restored(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    v1 = stores.write(STORE, "a.md", b"one\n", provenance=ADMIN)
    v2 = stores.append(STORE, "a.md", b"two\n", provenance=ADMIN)
    stores.delete(STORE, "a.md", provenance=ADMIN)
    assert not stores.read(STORE, "a.md").exists
    versions = stores.versions(STORE, "a.md")
    assert [v.sha256 for v in versions] == [v1.content_sha256, v2.content_sha256]
    assert all(v.available for v in versions)
    assert [v.op for v in versions] == ["write", "append"]

    assert v1.content_sha256 is not None
    restored = stores.restore(STORE, "a.md", v1.content_sha256, provenance=Provenance.admin("bob"))
    assert restored.content_sha256 == v1.content_sha256 and restored.previous_sha256 is None
    assert stores.read(STORE, "a.md").content == "one\n"
    last = stores.audit(STORE)[-1]
    assert (last.op, last.actor, last.sha256_after) == ("restore", "bob", v1.content_sha256)
    # bookkeeping lives under .lw/, never inside the store folder
    root = data_dir / "memory/workflows/notes"
    assert sorted(p.name for p in root.iterdir()) == ["a.md"]
    assert (data_dir / ".lw").is_dir()


def test_redaction_reaches_every_kept_version(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    email = "jane.doe@example.com"
    stores.write(STORE, "c.md", f"customer {email}\n".encode(), provenance=ADMIN)
    stores.append(STORE, "c.md", b"called back\n", provenance=ADMIN)
    stores.replace(STORE, "c.md", "called back", "resolved", provenance=ADMIN)
    stores.write(STORE, "other.md", b"unrelated\n", provenance=ADMIN)

    result = stores.redact(STORE, "c.md", r"[\w.]+@example\.com", regex=True,
                           provenance=Provenance.admin("dpo"))  # fmt: skip
    assert result.current_changed
    assert len(result.versions_redacted) == 3
    assert stores.read(STORE, "c.md").content == "customer [REDACTED]\nresolved\n"
    for version in stores.versions(STORE, "c.md"):
        blob = stores.blob(STORE, version.sha256)
        assert blob is not None and email.encode() not in blob
    for old in result.versions_redacted:  # old addresses resolve to the clean content
        assert email.encode() not in (stores.blob(STORE, old) or b"")
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert email.encode() not in path.read_bytes(), path
    entry = stores.audit(STORE)[-1]
    assert (entry.op, entry.actor, entry.path) == ("redact", "dpo", "c.md")
    assert entry.detail == result.versions_redacted
    assert stores.read(STORE, "other.md").content == "unrelated\n"


def test_prune_versions_keeps_the_last_ones(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    for i in range(6):
        stores.append(STORE, "log.md", f"line {i}\n".encode(), provenance=ADMIN)
    stores.write(STORE, "other.md", b"only version", provenance=ADMIN)
    assert stores.prune_versions(STORE, keep_last=2) == 4
    versions = stores.versions(STORE, "log.md")
    assert [v.available for v in versions] == [False] * 4 + [True] * 2
    assert stores.blob(STORE, versions[-1].sha256) == stores.read(STORE, "log.md").content.encode()
    assert all(v.available for v in stores.versions(STORE, "other.md"))
    assert stores.prune_versions(STORE, keep_last=2) == 0
