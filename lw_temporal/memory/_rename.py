"""Moving a file or a folder inside one store, as one audited mutation.

A rename is a write under the new name and a delete under the old one, planned in one
transaction: both happen or neither does. Each moved file keeps its history where
people look for it: the new name's first version comes from the move (audit op
``rename``, ``detail.from`` naming the old path) and the old name's last audit line
says where it went (``detail.to``), its last version kept like any deleted file's.
Content is not scanned again (it passed the scan when it entered the store), but the
quota is checked like any commit's: the old name's last version is kept, every move adds
audit and ledger lines and a new folder is an entry, so renames back and forth would
otherwise grow a full store without bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, MEMORY_CONFLICT, MEMORY_NOT_FOUND, lw_error
from . import _fs
from ._records import MutationResult, Provenance
from ._rules import refuse
from ._txn import Txn

if TYPE_CHECKING:
    from ._gate import TaintGate
    from ._hold import Hold
    from ._writer import StoreWriter


def rename_body(
    old: tuple[str, ...],
    new: tuple[str, ...],
    shown_old: str,
    shown_new: str,
    who: str,
) -> Callable[[Txn], MutationResult]:
    def body(txn: Txn) -> MutationResult:
        if not old or not new:
            raise lw_error(
                INVALID_REQUEST, f"{who}: a store's root folder cannot be renamed or replaced"
            )
        if new[: len(old)] == old:
            raise lw_error(INVALID_REQUEST, f"{who}: {shown_new} is inside {shown_old}")
        kind = txn.kind(old, shown_old)
        if kind is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{who}: {shown_old} does not exist")
        if kind not in ("file", "dir"):
            raise lw_error(INVALID_REQUEST, f"{who}: {shown_old} is a {kind}; it cannot be moved")
        if txn.kind(new, shown_new) is not None:
            raise lw_error(MEMORY_CONFLICT, f"{who}: {shown_new} already exists")
        moves = [(old, new)] if kind == "file" else _tree(txn, old, new, shown_old)
        first = len(txn.audit)
        sha = None
        size = 0
        for source, target in moves:
            content = txn.content(source, shown_old)
            if content is None:
                continue
            after, _findings, _refusal = txn.stage_write(
                target, content, "rename", shown_new, before=None, scan=False
            )
            sha, size = after.sha, len(content)
        if kind == "file":
            txn.stage_delete_file(old, shown_old, "file")
        else:
            txn.stage_delete_tree(old, shown_old)
        old_rel, new_rel = "/".join(old), "/".join(new)
        for i in range(first, len(txn.audit)):
            entry = txn.audit[i]
            if entry.op == "rename":
                moved_from = old_rel + entry.path[len(new_rel) :]
                txn.audit[i] = entry.model_copy(update={"detail": {"from": moved_from}})
            elif entry.op == "delete":
                moved_to = new_rel + entry.path[len(old_rel) :]
                txn.audit[i] = entry.model_copy(update={"op": "rename", "detail": {"to": moved_to}})
        refuse(txn, "rename", shown_new, who, None, 0)  # the quota, as every commit's
        return MutationResult(
            path=shown_new,
            op="rename",
            content_sha256=sha if kind == "file" else None,
            previous_sha256=None,
            bytes=size if kind == "file" else 0,
            deleted=tuple("/".join(source) for source, _ in moves),
        )

    return body


def _tree(
    txn: Txn, old: tuple[str, ...], new: tuple[str, ...], shown: str
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every file below the folder ``old`` and where it goes; a link inside is refused
    (memory never follows or carries one)."""
    assert txn.batch.root_fd is not None
    with _fs.opened_dir(txn.batch.root_fd, old, create=False, shown=shown) as fd:
        listing = [] if fd is None else list(_fs.walk_files(fd, ""))
    moves = []
    for sub, kind, _size in listing:
        if kind == "dir":
            continue
        if kind != "file":
            raise lw_error(
                INVALID_REQUEST, f"{shown}/{sub} is a {kind}; remove it before moving the folder"
            )
        parts = tuple(sub.split("/"))
        moves.append((old + parts, new + parts))
    return moves


class StoreMoves:
    """Renames for :class:`MemoryStores` (a mixin: it needs ``_writer``, and the
    taint gate's routing of :class:`StoreQuarantine`)."""

    _writer: StoreWriter
    gate: TaintGate | None

    if TYPE_CHECKING:

        def _route(
            self, store: StoreRef, provenance: Provenance, *rels: str
        ) -> tuple[Provenance, Hold | None]: ...

    def rename(
        self,
        store: StoreRef,
        path: str,
        new_path: str,
        *,
        provenance: Provenance,
        shown: str | None = None,
        new_shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Move the file or folder ``path`` to ``new_path`` (which must not exist) in
        one store; the result names the new path and, in ``deleted``, the old files."""
        shown = shown or f"{store}:{path}"
        new_shown = new_shown or f"{store}:{new_path}"
        provenance, hold = self._route(store, provenance, new_path)
        if hold is not None:
            return hold.rename(path, new_path, provenance, shown, new_shown)
        old = _fs.clean_relative(path, shown)
        new = _fs.clean_relative(new_path, new_shown)
        body = rename_body(old, new, shown, new_shown, provenance.who())
        result = self._writer.mutate(store, provenance, "rename", body, MutationResult, cancel)
        if self.gate is not None:
            self.gate.moved(store, "/".join(old), "/".join(new), provenance)
        return result
