"""What ``forget`` does with the memory a tree's runs wrote.

Found through every store's audit log: each file with a change made by one of the
tree's workflows (their activities, bash commits, a dream's promotion).

- ``keep`` (the default): nothing changes; each such file is named as a remaining
  place, with what erases it (``memory redact``, or ``forget --memory revert``).
- ``revert``: a file whose every change since the tree's first one was the tree's is
  put back as it was before that first change (restored to that version, or removed
  if the tree created it), audited with the forgetter as actor. A file someone else
  changed after the tree is left as it is and named. The versions the tree wrote stay
  among the file's kept versions until the store's retention drops them
  (``memory prune``) or a redaction rewrites them; the report names them.

Memory search's index follows the stores' own commits, so a revert reaches it; the
journal of each store with a revert is emptied (checkpointed) afterwards, since its
records held what the tree wrote. A forget stopped between its restores and that is
finished by running it again: a file already as it was before the tree counts as
reverted, so its store's journal is emptied then.
"""

from __future__ import annotations

import hashlib

from temporalio.exceptions import ApplicationError

from .._ids import DREAMING_DEFINITION_ID
from .._scope import StoreKind, StoreRef
from ..memory._records import AuditEntry, Provenance
from ..memory._stores import MemoryStores
from ._forget import Erasure, add_eraser, in_tree
from ._records import Place

#: Audit operations that do not change what a file holds (a redaction rewrites text
#: in place, under every version's new address).
_NEUTRAL = {"redact", "prune", "retention"}


def all_stores(stores: MemoryStores) -> list[StoreRef]:
    """Every store of the data dir, dreaming's notes included."""
    found = [
        s
        for s in stores.stores()
        if not (s.kind is StoreKind.WORKFLOW and s.key == DREAMING_DEFINITION_ID)
    ]
    dreaming = stores.layout.state / "stores" / StoreKind.DREAMING.value
    if dreaming.is_dir():
        found += [StoreRef(StoreKind.DREAMING, p.name) for p in sorted(dreaming.iterdir())]
    return found


def memory_written(erasure: Erasure) -> None:
    stores, tree = erasure.stores, erasure.tree_id
    for store in all_stores(stores):
        by_path: dict[str, list[AuditEntry]] = {}
        reverted = False
        for entry in stores.audit(store):
            if entry.path and entry.op not in ("mkdir", "rmdir"):
                by_path.setdefault(entry.path, []).append(entry)
        for path, history in by_path.items():
            mine = [e for e in history if in_tree(e.workflow_id, tree)]
            if not mine:
                continue
            where = f"{stores.label(store)}:{path}"
            if erasure.memory == "keep":
                erasure.remaining.append(
                    Place(
                        what="memory written by the tree",
                        path=where,
                        note=f"{len(mine)} changes by its runs; redact what must go "
                        "(lw-temporal memory redact), or forget --memory revert",
                    )
                )
                continue
            reverted |= _revert(erasure, store, path, where, history, mine)
        if reverted:  # the journal still held what the tree wrote, base64
            stores.empty_journal(store)


def _revert(
    erasure: Erasure,
    store: StoreRef,
    path: str,
    where: str,
    history: list[AuditEntry],
    mine: list[AuditEntry],
) -> bool:
    """Put ``path`` back as it was before the tree; whether it was."""
    tree = erasure.tree_id
    kept = f"the {len(mine)} versions its runs wrote stay kept (memory prune or redact)"
    before = mine[0].sha256_before
    stores = erasure.stores
    if _as_before(stores, store, path, before):
        # a forget stopped after its restores and before the journal was emptied (or
        # someone else undid the tree's change): nothing to restore, but the journal
        # must still go, which this answer makes the caller do
        erasure.removed.append(
            Place(what="memory reverted", path=where, note="already as before the tree")
        )
        erasure.remaining.append(Place(what="kept versions of the tree", path=where, note=kept))
        return True
    since = history[history.index(mine[0]) :]
    others = [e for e in since if not in_tree(e.workflow_id, tree) and e.op not in _NEUTRAL]
    if others:
        erasure.remaining.append(
            Place(
                what="memory not reverted",
                path=where,
                note=f"changed after the tree by {others[-1].by()}; redact what must go",
            )
        )
        return False
    provenance = Provenance.admin(erasure.by)
    try:
        if before is None:
            if stores.read_bytes(store, path) is not None:
                stores.delete(store, path, provenance=provenance)
        else:
            stores.restore(store, path, before, provenance=provenance)
    except ApplicationError as err:
        erasure.remaining.append(
            Place(what="memory not reverted", path=where, note=f"{err.message}; {kept}")
        )
        return False
    shown = "removed (the tree created it)" if before is None else f"restored to {before[:12]}"
    erasure.removed.append(Place(what="memory reverted", path=where, note=shown))
    erasure.remaining.append(Place(what="kept versions of the tree", path=where, note=kept))
    return True


def _as_before(stores: MemoryStores, store: StoreRef, path: str, before: str | None) -> bool:
    """Whether ``path`` holds what it held before the tree's first change."""
    current = stores.read_bytes(store, path)
    if before is None or current is None:
        return before is None and current is None
    return hashlib.sha256(current).hexdigest() == before


@add_eraser
def _memory(erasure: Erasure) -> None:
    """memory the tree's runs wrote"""
    memory_written(erasure)
