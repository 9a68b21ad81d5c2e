"""Forget reaches memory search's index: each store in which ``forget --memory revert``
put a file back has its search index scrubbed.

The index follows the revert's own commits (the restored or removed file is indexed as
it now is), but FTS5 keeps a deleted row's words in its segments until they are merged,
so the reverted text could still be read from the index files; the scrub merges them
and copies the index into a new file (``MemoryStores.purge_search``).
"""

from __future__ import annotations

from ._forget import Erasure, add_eraser
from ._forget_memory import all_stores
from ._records import Place


@add_eraser
def search_indexes(erasure: Erasure) -> None:
    """what was reverted from the memory search indexes"""
    stores = erasure.stores
    reverted = [p.path for p in erasure.removed if p.what == "memory reverted"]
    for store in all_stores(stores):
        label = stores.label(store)
        if not any(path.startswith(f"{label}:") for path in reverted):
            continue
        if not stores.files(store).search.exists():
            continue
        stores.purge_search(store)
        erasure.removed.append(
            Place(
                what="search index scrubbed",
                path=label,
                note="no word of what was reverted is left in it",
            )
        )
