"""The commit keeps the index in proportion to the change: an append re-indexes only a
file's last chunk and what it adds, an edit in place only the chunk it touched; after
any sequence of writes, appends, edits, restores, deletes and prunes the kept index
holds exactly what a build from the files holds, and is still in step (never repaired).
Chunking again from a file's last chunk gives what chunking the whole file gives."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef, _chunks
from lw_temporal.memory._index import tree_id
from lw_temporal.memory._searchdb import meta

STORE = StoreRef(StoreKind.WORKFLOW, "ledger")
ADMIN = Provenance.admin("seed")
PARAGRAPH = "A paragraph of notes about the ledger, long enough to matter here.\n" * 6 + "\n"


def _conn(stores: MemoryStores) -> sqlite3.Connection:
    path = stores.search_index(STORE)
    assert path is not None
    return stores.files(STORE).search.connect(path)


def _chunk_ids(stores: MemoryStores, rel: str) -> list[int]:
    rows = (
        _conn(stores)
        .execute("SELECT id FROM chunks WHERE path = ? ORDER BY start", (rel,))
        .fetchall()
    )
    return [int(r[0]) for r in rows]


def _rows(conn: sqlite3.Connection) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    chunks = conn.execute(
        "SELECT c.path, c.line, c.start, c.sha, b.text FROM chunks c JOIN body b "
        "ON b.rowid = c.id ORDER BY c.path, c.start"
    ).fetchall()
    files = conn.execute("SELECT path, sha, size, binary FROM files ORDER BY path").fetchall()
    return chunks, files


def test_an_append_and_an_edit_touch_only_their_chunks(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    stores.write(STORE, "big.md", (PARAGRAPH * 40).encode(), provenance=ADMIN)
    stores.search(STORE, "ledger")  # builds the index
    before = _chunk_ids(stores, "big.md")
    assert len(before) >= 10

    stores.append(STORE, "big.md", b"A closing line about otters.\n", provenance=ADMIN)
    after = _chunk_ids(stores, "big.md")
    assert after[: len(before) - 1] == before[:-1]  # only the last chunk was redone
    assert stores.search(STORE, "otters").hits[0].lines[0].number == 281

    stores.replace(STORE, "big.md", "otters", "beavers", provenance=ADMIN)
    stores.write(
        STORE, "big.md",
        (PARAGRAPH * 3 + "An inserted paragraph on herons.\n\n" + PARAGRAPH * 37).encode()
        + b"A closing line about beavers.\n",
        provenance=ADMIN,
    )  # fmt: skip
    edited = _chunk_ids(stores, "big.md")
    assert len(set(edited) - set(after)) <= 2  # the chunk with herons (and its neighbour)
    hit = stores.search(STORE, "herons").hits[0]
    assert (hit.path, hit.lines[0].number) == ("big.md", 22)
    assert stores.search(STORE, "beavers").hits[0].lines[0].number == 283  # lines moved on


def test_kept_index_equals_a_fresh_build(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    rng = random.Random(29)
    words = ["heron", "otter", "ledger", "ink", "quay", "tide", "élan", "naïve", "\n", "\n\n"]
    stores.write(STORE, "seed.md", b"start\n", provenance=ADMIN)
    stores.search(STORE, "start")
    generation = stores.files(STORE).search.current()
    for step in range(160):
        rel = f"d{rng.randrange(3)}/f{rng.randrange(6)}.md"
        text = " ".join(rng.choices(words, k=rng.randrange(1, 400))).encode()
        current = stores.read_bytes(STORE, rel)
        action = rng.random()
        if current is None or action < 0.3:
            stores.write(STORE, rel, text, provenance=ADMIN)
        elif action < 0.65:
            stores.append(STORE, rel, text, provenance=ADMIN)
        elif action < 0.75 and current.count(b"ledger") == 1:
            stores.replace(STORE, rel, "ledger", "journal", provenance=ADMIN)
        elif action < 0.85:
            kept = [v.sha256 for v in stores.versions(STORE, rel) if v.available]
            stores.restore(STORE, rel, rng.choice(kept), provenance=ADMIN)
        elif action < 0.95:
            stores.delete(STORE, rel, provenance=ADMIN)
        else:
            stores.delete(STORE, rel.split("/")[0], recursive=True, provenance=ADMIN)
        if step % 40 == 39:
            stores.prune(STORE, keep_last=2, provenance=ADMIN)
    conn = _conn(stores)
    assert stores.files(STORE).search.current() == generation  # kept, never rebuilt
    usage = stores.files(STORE).index.read_usage()
    assert usage is not None and meta(conn, "synced") == tree_id(usage.tree)
    rows = _rows(conn)
    stores.reindex(STORE)
    assert _rows(_conn(stores)) == rows


_PIECES = st.sampled_from(["a", "bb", " ", "\n", "\n\n", "é", "x" * 40, "\n \n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=60).map("".join), st.lists(_PIECES, max_size=60).map("".join))
def test_chunking_from_the_last_chunk_equals_chunking_the_whole(old: str, added: str) -> None:
    before, after = old.encode(), (old + added).encode()
    size = _chunks.CHUNK_BYTES
    _chunks.CHUNK_BYTES = 24  # small chunks: every kind of cut in a short text
    try:
        whole = _chunks.chunks(after)
        kept = _chunks.chunks(before)
        if kept:
            last = kept[-1]
            redone = _chunks.chunks(after[last.start :], offset=last.start, line=last.line)
            assert kept[:-1] + redone == whole
        assert b"".join(c.data for c in whole) == after
        for chunk in whole:
            chunk.data.decode("utf-8")  # cut on character boundaries
            assert chunk.line == after[: chunk.start].count(b"\n") + 1
    finally:
        _chunks.CHUNK_BYTES = size
