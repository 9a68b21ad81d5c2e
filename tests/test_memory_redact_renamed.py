"""A redaction of a renamed file reaches its versions under every name it had: named
by its new name, the versions it had before the move; named by its old name, the file
it became. Afterwards no byte of the store's files or bookkeeping holds the text, and
the file and its history still read.

Before the fix a redaction followed one name's audit lines only: by the new name it
left the old name's versions (and wrote one of them out whole, as a dependent of the
version it cleaned); by the old name it left the moved file as it was, under an
address now redirected to a clean one."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef

STORE = StoreRef(StoreKind.WORKFLOW, "notes")
BY = Provenance.admin("dpo")
NAME = b"Dana Reyes"


def _holding(data_dir: Path) -> list[str]:
    return [
        str(p.relative_to(data_dir))
        for p in data_dir.rglob("*")
        if p.is_file() and not p.is_symlink() and NAME in p.read_bytes()
    ]


@pytest.mark.parametrize("named", ["a.md", "c.md"])
def test_redaction_follows_renames(data_dir: Path, named: str) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "a.md", b"hello " + NAME + b"\n", provenance=BY)
    stores.append(STORE, "a.md", b"more\n", provenance=BY)
    stores.rename(STORE, "a.md", "b.md", provenance=BY)
    stores.replace(STORE, "b.md", "more", "most", provenance=BY)
    stores.rename(STORE, "b.md", "c.md", provenance=BY)
    stores.write(STORE, "other.md", b"not " + NAME + b"'s\n", provenance=BY)
    assert _holding(data_dir)

    result = stores.redact(STORE, named, NAME.decode(), provenance=BY)

    assert _holding(data_dir) == ["memory/workflows/notes/other.md"]
    assert len(result.versions_redacted) >= 3
    assert stores.read(STORE, "c.md").content == "hello [REDACTED]\nmost\n"
    for name in ("a.md", "b.md", "c.md"):
        for version in stores.versions(STORE, name):
            data = stores.blob(STORE, version.sha256)
            assert data is not None and NAME not in data and b"hello [REDACTED]\n" in data
    assert stores.read(STORE, "other.md").content == "not Dana Reyes's\n"
