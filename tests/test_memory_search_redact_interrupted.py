"""A redaction killed after its commit and before its purge (here: its process exits
there) leaves no search hit, and the next search of the store finishes the purge:
neither the index files nor the journal keep the redacted text or its stemmed words,
which they did before the search."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._search import PURGE_PENDING

STORE = StoreRef(StoreKind.WORKFLOW, "vault")
SECRET = "quixotic marmalade"
#: The stems FTS5's porter tokenizer keeps of the secret's words.
STEMS = (b"quixot", b"marmalad")

#: Redacts in a process of its own that dies where a kill would leave it: committed,
#: not yet checkpointed or purged.
KILLED = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from lw_temporal.ids import DataLayout
    from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
    from lw_temporal.memory._stores import MemoryStores as Stores

    Stores.empty_journal = lambda *args, **kwargs: os._exit(9)
    stores = MemoryStores(DataLayout.at(Path(sys.argv[1])))
    stores.redact(StoreRef(StoreKind.WORKFLOW, "vault"), "people.md", sys.argv[2],
                  provenance=Provenance.admin("dpo"))
    """
)


def _index_bytes(stores: MemoryStores) -> bytes:
    folder = stores.files(STORE).search.dir
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()).lower()


def test_the_next_search_finishes_a_killed_redaction(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    filler = "".join(f"Paragraph {n} about hiring loops.\n\n" for n in range(200))
    note = f"{filler}Reviewed {SECRET} today.\n\n{filler}"
    stores.write(STORE, "people.md", note.encode(), provenance=Provenance.admin("seed"))
    for n in range(20):
        stores.write(STORE, f"other-{n}.md", f"note {n}\n".encode(),
                     provenance=Provenance.admin("seed"))  # fmt: skip
    assert [h.path for h in stores.search(STORE, "quixotic").hits] == ["people.md"]

    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(data_dir), SECRET], capture_output=True, timeout=120
    )
    assert killed.returncode == 9, killed.stderr.decode()
    files = stores.files(STORE)
    assert b"quixot" in _index_bytes(stores)  # what the purge would have removed
    assert (files.state / PURGE_PENDING).exists()

    assert stores.search(STORE, "quixotic marmalade").hits == ()
    index = _index_bytes(stores)
    for stem in STEMS:
        assert stem not in index, stem
    assert files.journal.records() == []
    assert not (files.state / PURGE_PENDING).exists()
    assert b"[REDACTED]" in (files.root / "people.md").read_bytes()
