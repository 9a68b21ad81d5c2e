"""Listings and searches as a run sees memory: its held changes over the store, and
the taint what it read brings.

A listing is read (names are text a model reads), so a listing that shows untrusted
input or a tainted file taints the run as a read of it would. A tainted run's listing
of a store it holds changes to shows them; its searches rank the store's files (the
index is the store's), say that its held changes are not searched, and leave out hits
its held changes hide or replace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .._scope import Mount, Scope
from ._records import ListEntry, ListResult, MemoryListRequest, MemorySearchResult
from ._search import SearchTarget

if TYPE_CHECKING:
    from ._gate import TaintGate

_KINDS: dict[str, Literal["file", "dir", "link", "other"]] = {
    "file": "file", "dir": "dir", "link": "link"
}  # fmt: skip


def viewed_listing(
    gate: TaintGate,
    scope: Scope,
    mount: Mount,
    rel: str,
    listed: ListResult,
    request: MemoryListRequest,
) -> ListResult:
    """``listed`` (store-relative paths) as the run sees it, after tainting the run
    for what it shows."""
    assert mount.store is not None
    held = gate.held_for(scope, mount.store)
    current = None if held is None else held.load()
    if held is not None and current is not None:
        seen = held.view(current, rel) if rel else None
        if seen is not None and seen.kind == "file":
            size = len(seen.content or b"")
            entries: tuple[ListEntry, ...] = (ListEntry(path=rel, kind="file", size=size),)
            truncated = False
        elif seen is not None and seen.kind is None:
            entries, truncated = (), False
        else:
            below = held.files_below(current, rel, recursive=request.recursive)
            truncated = len(below) > request.limit
            entries = tuple(
                ListEntry(path=p, kind=_KINDS.get(k, "other"), size=s)
                for p, k, s in below[: request.limit]
            )
        listed = listed.model_copy(update={"entries": entries, "truncated": truncated})
    gate.saw(scope, mount, [e.path for e in listed.entries])
    return listed


def searched(
    gate: TaintGate, scope: Scope, targets: list[SearchTarget], result: MemorySearchResult
) -> MemorySearchResult:
    """Taint the run for the hits it got; for a run holding changes, drop the hits its
    view hides or replaces and say its held changes are not searched."""
    mounts = {f"{m.virtual}/": m for m in scope.mounts if m.store is not None}
    hits = list(result.hits)
    notes = list(result.notes)
    for target in targets:
        mount = mounts.get(target.shown)
        if mount is None or mount.store is None:
            continue
        rels = [h.path[len(target.shown) :] for h in hits if h.path.startswith(target.shown)]
        gate.saw(scope, mount, rels)
        held = gate.held_for(scope, mount.store)
        current = None if held is None else held.load()
        if held is None or current is None or not current.entries:
            continue
        hidden = {r for r in rels if held.covering(current, r) is not None}
        hits = [h for h in hits if h.path[len(target.shown) :] not in hidden]
        notes.append(
            f"{len(current.entries)} held (quarantined) changes of this run to {mount.virtual}/ "
            "are not searched; read or list those paths to see them"
        )
    return result.model_copy(update={"hits": tuple(hits), "notes": tuple(notes)})
