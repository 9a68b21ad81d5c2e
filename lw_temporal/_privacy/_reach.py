"""A redaction's reach beyond the memory file: every other copy at rest, scrubbed or named.

After ``MemoryStores.redact`` rewrote the file and its kept versions, the same text may
sit where the agents' runs put it (:mod:`._places`): their conversations, their
scratch (a dream's per-run files and records included) and dream bookkeeping
(proposals' ``diff.txt``, consolidator state), tainted runs' changes held in
quarantine (so a release cannot bring the text back) and the records of their approval
requests (which hold the calls' arguments: a command, a file's content). Those are
scrubbed. What is not
changed is named, each with what erases it:

- other memory files holding it (current or kept versions): ``memory redact`` them;
- Temporal histories: every run tree whose files held it, whose runs wrote the file,
  or whose runs started while a version holding it was current (they may have read it);
  ``forget`` erases a tree's history payloads;
- anything else a final sweep of the whole data dir (memory root and runs root, every
  file, links not followed) still finds it in.

So after a redaction, a search of the data dir finds the text nowhere, or the report
names the place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from .._ids import DataLayout, InvalidWorkflowId, parse_workflow_id
from .._scope import StoreRef
from ..memory._manifest import readers
from ..memory._records import RedactResult
from ..memory._stores import MemoryStores
from . import _places
from ._forget_memory import all_stores
from ._keys import tree_of
from ._records import MAX_LISTED, Place, ReachReport

#: Files the final sweep reads between two progress lines.
_PROGRESS_EVERY = 2000


class _Found:
    def __init__(self) -> None:
        self.changed: list[Place] = []
        self.remaining: list[Place] = []
        self.trees: dict[str, str] = {}  # tree -> why its history may hold the text
        self.seen: set[Path] = set()

    def tree(self, workflow_id: str | None, why: str) -> None:
        if not workflow_id:
            return
        try:
            parse_workflow_id(workflow_id)
        except InvalidWorkflowId:
            return
        self.trees.setdefault(tree_of(workflow_id), why)


def reach(
    stores: MemoryStores,
    store: StoreRef,
    rel: str,
    pattern: re.Pattern[bytes],
    result: RedactResult,
    *,
    replacement: bytes = b"[REDACTED]",
    progress: Callable[[str], None] | None = None,
) -> ReachReport:
    """Scrub ``pattern`` from the runs' copies and name every other place it stays."""
    layout = stores.layout
    scrubber = _places.Scrubber(pattern, replacement)
    found = _Found()
    say = progress or (lambda _line: None)
    say("scrubbing the runs' conversations, scratch and dream bookkeeping")
    for what, root in _run_places(layout):
        for path, info in _places.walk(root):
            outcome = scrubber.scrub(root, path, info)
            if outcome is None:
                found.remaining.append(
                    Place(what=what, path=_rel(layout, path), note="holds it; could not scrub")
                )
            elif outcome:
                found.changed.append(Place(what=what, path=_rel(layout, path)))
            else:
                continue
            found.seen.add(path)
            found.tree(_workflow_of(layout, path), f"its {what} held it")
    say("looking for it in the other memory files")
    stores_by_root = _other_memory(stores, store, rel, scrubber, found)
    _histories(stores, store, rel, result, found)
    say("sweeping the whole data dir for what is left")
    _sweep(layout, scrubber, found, stores_by_root, say)
    for tree, why in sorted(found.trees.items()):
        found.remaining.append(
            Place(
                what="Temporal history",
                path=tree,
                note=f"{why}: its payloads may hold it; lw-temporal forget {tree} erases them",
            )
        )
    return ReachReport(
        changed=tuple(found.changed[:MAX_LISTED]),
        remaining=tuple(found.remaining[:MAX_LISTED]),
        changed_count=len(found.changed),
        remaining_count=len(found.remaining),
        trees=tuple(sorted(found.trees)),
    )


def _run_places(layout: DataLayout) -> list[tuple[str, Path]]:
    return [
        ("conversation", _places.conversations(layout)),
        ("run scratch", layout.runs),
        ("dream bookkeeping", _places.dream_books(layout)),
        ("quarantined changes", layout.state / "quarantine"),
        ("approval records", _places.approval_records(layout)),
    ]


def _rel(layout: DataLayout, path: Path) -> str:
    for root in (layout.local_root, layout.root):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return str(path)


def _workflow_of(layout: DataLayout, path: Path) -> str | None:
    """The run tree a run place belongs to: its first folder under ``runs/``, the
    conversations or the approval records."""
    for root in (layout.runs, _places.conversations(layout), _places.approval_records(layout)):
        if path.is_relative_to(root):
            parts = path.relative_to(root).parts
            return parts[0] if len(parts) > 1 else None
    return None


def _other_memory(
    stores: MemoryStores,
    redacted: StoreRef,
    rel: str,
    scrubber: _places.Scrubber,
    found: _Found,
) -> dict[Path, StoreRef]:
    """Name every other memory file holding the text (it is not this command's to
    change: the operator redacts each one)."""
    roots: dict[Path, StoreRef] = {}
    for store in all_stores(stores):
        root = stores.root(store)
        roots[root] = store
        roots[stores.state_dir(store)] = store
        label = stores.label(store)
        for path, info in _places.walk(root):
            if info.st_size > _places.MAX_SCRUB_BYTES:
                continue
            name = path.relative_to(root).as_posix()
            if store == redacted and name == rel:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if scrubber.holds(data):
                found.seen.add(path)
                found.remaining.append(
                    Place(
                        what="memory file",
                        path=f"{label}:{name}",
                        note=f"lw-temporal memory redact --data-dir DIR --by NAME {label} "
                        f"{name} PATTERN",
                    )
                )
                for entry in stores.audit(store, path=name):
                    found.tree(entry.workflow_id, f"its runs wrote {label}:{name}")
    return roots


def _histories(
    stores: MemoryStores, store: StoreRef, rel: str, result: RedactResult, found: _Found
) -> None:
    """The trees whose histories may hold the redacted text: those that wrote the file,
    and those that started while a version holding it was current."""
    label = f"{stores.label(store)}:{rel}"
    for entry in stores.audit(store, path=rel):
        if entry.op != "redact":
            found.tree(entry.workflow_id, f"its runs wrote {label}")
    for sha in result.versions_redacted:
        for manifest in readers(stores, store, rel, sha):
            found.tree(manifest.workflow_id, f"its runs started while {label} held it")


def _sweep(
    layout: DataLayout,
    scrubber: _places.Scrubber,
    found: _Found,
    stores_by_root: dict[Path, StoreRef],
    say: Callable[[str], None],
) -> None:
    roots = [layout.root] if layout.local_root == layout.root else [layout.root, layout.local_root]
    keys = layout.state / "keys"
    scrubbed = [root for _, root in _run_places(layout)]  # read once already, by descriptor
    count = 0
    for root in roots:
        for path, info in _places.walk(root):
            count += 1
            if count % _PROGRESS_EVERY == 0:
                say(f"  {count} files swept")
            if path in found.seen or path.is_relative_to(keys):
                continue
            if any(path.is_relative_to(r) for r in scrubbed):
                continue
            if info.st_size > _places.MAX_SCRUB_BYTES:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if not scrubber.holds(data):
                continue
            owner = next((s for r, s in stores_by_root.items() if path.is_relative_to(r)), None)
            what = "bookkeeping" if owner is None else f"bookkeeping of store {owner}"
            note = (
                "a kept version or record of that store: redact the file that held it"
                if owner is not None
                else "not a place the agents' runs write; remove or edit it by hand"
            )
            found.remaining.append(Place(what=what, path=_rel(layout, path), note=note))
