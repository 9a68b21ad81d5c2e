"""Two processes (each with several threads, so appends to one file share a group
commit) appending to one store while a third keeps searching it:
every search answers, every committed line is found afterwards at its line number,
and the index the commits kept is in step with the store without a repair."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._index import tree_id
from lw_temporal.memory._searchdb import meta

STORE = StoreRef(StoreKind.WORKFLOW, "busy")
WRITERS, LINES = 2, 12


def _write(data_dir: str, writer: int) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    rel = "shared.md" if writer == 0 else "own.md"

    def append(i: int) -> None:
        line = f"entry tok{writer}x{i} from writer {writer}\n".encode()
        stores.append(STORE, rel, line, provenance=Provenance.admin(f"w{writer}"))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(append, range(LINES)))


def _search(data_dir: str, ready: object, stop: object, answers: object) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    count = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        result = stores.search(STORE, "entry writer", limit=5)
        assert result.hits
        count += 1
        ready.set()  # type: ignore[attr-defined]
    answers.value = count  # type: ignore[attr-defined]


def test_searches_and_commits_from_several_processes(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    seed = Provenance.admin("seed")
    stores.write(STORE, "shared.md", b"# entries, writer by writer\n", provenance=seed)
    assert stores.search(STORE, "entries").hits
    generation = stores.files(STORE).search.current()

    ctx = multiprocessing.get_context("spawn")
    ready, stop, answers = ctx.Event(), ctx.Event(), ctx.Value("i", 0)
    searcher = ctx.Process(target=_search, args=(str(data_dir), ready, stop, answers))
    writer = ctx.Process(target=_write, args=(str(data_dir), 1))
    searcher.start()
    # The writes start once the searcher answers, so they run beside its searches even
    # where a loaded machine is slow to start a process.
    assert ready.wait(timeout=300), "the searcher never answered"
    writer.start()
    _write(str(data_dir), 0)  # this process too, meanwhile
    writer.join(timeout=300)
    assert writer.exitcode == 0
    stop.set()
    searcher.join(timeout=300)
    assert searcher.exitcode == 0 and answers.value > 0

    files = stores.files(STORE)
    assert generation is not None and files.search.current() == generation
    usage = files.index.read_usage()
    assert usage is not None
    assert meta(files.search.connect(generation), "synced") == tree_id(usage.tree)
    found = 0
    for rel in ("shared.md", "own.md"):
        lines = (stores.read_bytes(STORE, rel) or b"").decode().splitlines()
        for number, text in enumerate(lines, 1):
            if text.startswith("entry "):
                token = text.split()[1]
                [hit] = stores.search(STORE, token).hits
                assert (hit.path, hit.lines[0].number, hit.lines[0].text) == (rel, number, text)
                found += 1
    assert found == WRITERS * LINES
