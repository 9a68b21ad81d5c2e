"""A store's search index is derived data: built from the files when it is missing,
built again when its file is damaged, repaired (not trusted) after a worker died
between the journal and the index or inside the index's own transaction, after a new
boot, and after hand edits are recounted; ``lw-temporal memory reindex`` builds it
again on demand. Every time the next search answers from the files as they are."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from lw_temporal._cli import main
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _searchdb, _searchrows

STORE = StoreRef(StoreKind.WORKFLOW, "atlas")
ADMIN = Provenance.admin("seed")


def _seed(data_dir: Path) -> MemoryStores:
    stores = MemoryStores(DataLayout.at(data_dir))
    for n in range(12):
        stores.write(STORE, f"n{n}.md", f"# Note {n}\n\nroutine text {n}\n".encode(),
                     provenance=ADMIN)  # fmt: skip
    stores.write(STORE, "rivers.md", b"# Rivers\n\nThe Danube flows east.\n", provenance=ADMIN)
    return stores


def _top(stores: MemoryStores, query: str) -> list[tuple[str, int]]:
    result = stores.search(STORE, query)
    return [(h.path, h.lines[0].number) for h in result.hits]


def _generations(stores: MemoryStores) -> list[str]:
    return sorted(p.name for p in stores.files(STORE).search.dir.glob("index-*.db"))


def test_missing_and_damaged_indexes_are_built_from_the_files(data_dir: Path) -> None:
    stores = _seed(data_dir)
    assert _top(stores, "danube") == [("rivers.md", 3)]
    index = stores.files(STORE).search
    current = index.current()
    assert current is not None
    index.forget_connections()
    for path in index.dir.iterdir():
        path.unlink()
    assert _top(stores, "danube") == [("rivers.md", 3)]  # missing: built again

    current = index.current()
    assert current is not None
    index.forget_connections()
    with current.open("r+b") as f:  # damage every page after the header
        f.seek(100)
        f.write(os.urandom(current.stat().st_size - 100))
    assert _top(stores, "danube") == [("rivers.md", 3)]
    assert index.current() != current and not current.exists()


def _die(data_dir: str, where: str) -> None:
    """Append to rivers.md and kill this process at ``where`` in its commit."""
    if where == "before-index":

        def follow(*_args: Any) -> None:
            os._exit(9)

        _searchdb.SearchIndex.follow = follow  # type: ignore[method-assign,assignment]
    else:
        original = _searchrows.extend

        def extend(*args: Any) -> bool:
            done = original(*args)
            os._exit(9)  # inside the index's transaction, before its COMMIT
            return done

        _searchrows.extend = extend  # type: ignore[assignment]
    MemoryStores(DataLayout.at(data_dir)).append(
        STORE, "rivers.md", b"The Rhine flows north.\n", provenance=ADMIN
    )


@pytest.mark.parametrize("where", ["before-index", "inside-index"])
def test_a_crash_between_journal_and_index_is_repaired(data_dir: Path, where: str) -> None:
    stores = _seed(data_dir)
    assert _top(stores, "danube") == [("rivers.md", 3)]
    proc = multiprocessing.get_context("spawn").Process(target=_die, args=(str(data_dir), where))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 9
    # committed (the journal), not marked applied, the index not moved on
    assert _top(stores, "rhine") == [("rivers.md", 4)]
    assert _top(stores, "danube") == [("rivers.md", 3)]
    assert len(_generations(stores)) == 1  # repaired in place, not rebuilt


def test_a_new_boot_checks_the_index_and_commits_wait_for_it(data_dir: Path) -> None:
    stores = _seed(data_dir)
    assert _top(stores, "danube") == [("rivers.md", 3)]
    index = stores.files(STORE).search
    current = index.current()
    assert current is not None
    index.checked_file.write_text(f"another-boot {current.name}\n")
    _searchdb._checked.clear()  # this process, as if started in that boot
    stores.append(STORE, "rivers.md", b"The Nile flows north.\n", provenance=ADMIN)
    conn = index.connect(current)
    assert conn.execute("SELECT count(*) FROM body WHERE body MATCH 'nile'").fetchone()[0] == 0
    assert _top(stores, "nile") == [("rivers.md", 4)]  # checked, then repaired
    assert index.checked_file.read_text().split()[1] == current.name


def test_hand_edits_are_found_after_a_recount(data_dir: Path) -> None:
    stores = _seed(data_dir)
    assert _top(stores, "danube") == [("rivers.md", 3)]
    (stores.root(STORE) / "rivers.md").write_text("# Rivers\n\nThe Volga flows south.\n")
    (stores.root(STORE) / "n3.md").unlink()
    stores.recount(STORE)
    assert _top(stores, "volga") == [("rivers.md", 3)]
    assert _top(stores, "danube") == []
    assert all(h.path != "n3.md" for h in stores.search(STORE, "routine", limit=50).hits)


def test_reindex_builds_a_new_generation(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = _seed(data_dir)
    assert _top(stores, "danube") == [("rivers.md", 3)]
    before = _generations(stores)
    code = main(["memory", "reindex", "--data-dir", str(data_dir), "workflow:atlas"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    assert out.startswith("workflow:atlas: search index built again from its files")
    after = _generations(stores)
    assert len(after) == 1 and after != before
    assert _top(stores, "danube") == [("rivers.md", 3)]
