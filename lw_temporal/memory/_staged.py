"""Committing what one bash command changed in a store (the overlay's upper files).

A file the command wrote is checked from the outside in: its size first (``lstat``:
a sparse or huge file is refused before a byte is read), then whether it merely
extends the current version (``>>``): same size prefix, same bytes, compared against
the live file at memory speed instead of being hashed, scanned or copied. An append is
committed as an append (the index's saved hash state, the new bytes scanned with the
seam before them, the old version kept as a prefix reference); anything else as a
rewrite, kept as the changed region when that is small (``sed -i``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from temporalio.exceptions import ApplicationError

from .._changes import StoreChange
from .._scan import Finding
from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, lw_error
from . import _fs
from ._index import FileState
from ._records import StagedChangeResult, StagedCommitResult
from ._rules import file_too_big
from ._txn import Conflict, Txn

#: At most this many per-path results are returned (refusals first); the rest are
#: counted in ``StagedCommitResult.omitted``.
MAX_LISTED = 200
_CHUNK = 1 << 20
_ORDER = {"delete": 0, "mkdir": 1, "write": 2}


def staged_body(
    store: StoreRef,
    changes: Sequence[StoreChange],
    heartbeat: Callable[[], None] | None,
    since: int | None = None,
) -> Callable[[Txn], StagedCommitResult]:
    ordered = sorted(changes, key=lambda c: (_ORDER[c.kind], c.path.count("/")))

    def body(txn: Txn) -> StagedCommitResult:
        results: list[StagedChangeResult] = []
        rejected = False
        moved = None if since is None else _moved_since(txn, since, ordered)
        if moved is not None:
            change, reason = moved
            results.append(
                StagedChangeResult(
                    path=change.path, kind=change.kind, status="rejected", reason=reason
                )
            )
            rejected = True
            ordered_now: Sequence[StoreChange] = ()
        else:
            ordered_now = ordered
        for n, change in enumerate(ordered_now):
            if heartbeat is not None and n % 64 == 0:
                heartbeat()
            res = stage_change(txn, change)
            rejected = rejected or res.status == "rejected"
            results.append(res)
        if not rejected:
            problem = txn.quota_problem()
            if problem:
                rejected = True
                results = [  # what grew the store: its files, and folders (entries)
                    r.model_copy(update={"status": "rejected", "reason": problem})
                    if r.kind in ("write", "mkdir")
                    else r
                    for r in results
                ]
        if rejected:
            txn.discard()
            results = [
                r if r.status == "rejected" else r.model_copy(update={"status": "rolled_back"})
                for r in results
            ]
        results.sort(key=lambda r: r.status != "rejected")
        return StagedCommitResult(
            store=str(store),
            applied=not rejected,
            changes=tuple(results[:MAX_LISTED]),
            omitted=max(0, len(results) - MAX_LISTED),
        )

    return body


def _moved_since(
    txn: Txn, since: int, changes: Sequence[StoreChange]
) -> tuple[StoreChange, str] | None:
    """The first change whose path (or a folder above or below it) another writer
    changed after the audit log's byte ``since`` (before the command started), and
    why: what the command wrote there came from the earlier content."""
    entries, _end = txn.batch.files.audit.read_since(since)
    touched = {e.path: e for _o, e in entries if e.path and e.op != "prune"}
    if not touched:
        return None
    for change in changes:
        for path, entry in touched.items():
            if (
                path == change.path
                or path.startswith(change.path + "/")
                or (change.path.startswith(path + "/"))
            ):
                return change, (
                    f"{txn.store}:{path} was changed by {entry.by()} ({entry.op}) while the "
                    "command ran, so none of this command's memory changes were kept (they "
                    "would overwrite that change): run it again on the current content"
                )
    return None


def stage_change(txn: Txn, change: StoreChange) -> StagedChangeResult:
    shown = f"{txn.store}:{change.path}"
    base = StagedChangeResult(path=change.path, kind=change.kind, status="applied")
    try:
        parts = _fs.clean_relative(change.path, shown)
        if not parts:
            raise lw_error(INVALID_REQUEST, "the store root itself cannot change")
        kind = txn.kind(parts, shown)
        if change.kind == "delete":
            if kind is None:
                return base
            if kind == "dir":
                txn.stage_delete_tree(parts, shown)
                return base
            before = txn.stage_delete_file(parts, shown, kind)
            return base.model_copy(update={"sha256_before": before})
        if change.kind == "mkdir":
            if kind == "dir":
                return base
            if kind is not None:
                raise lw_error(INVALID_REQUEST, f"{shown} exists as a {kind}")
            txn.stage_mkdir(parts)
            return base
        if change.source is None:
            raise lw_error(INVALID_REQUEST, "a staged write needs a source file")
        if kind not in (None, "file"):
            raise lw_error(INVALID_REQUEST, f"{shown} exists as a {kind}")
        return _stage_write(txn, parts, change.source, shown, base)
    except Conflict:
        raise
    except ApplicationError as err:
        return base.model_copy(update={"status": "rejected", "reason": err.message})
    except OSError as err:
        return base.model_copy(
            update={"status": "rejected", "reason": f"cannot read the new content: {err}"}
        )


def _stage_write(
    txn: Txn, parts: tuple[str, ...], source: Path, shown: str, base: StagedChangeResult
) -> StagedChangeResult:
    info = os.lstat(source)
    if not stat.S_ISREG(info.st_mode):
        return base.model_copy(
            update={"status": "rejected", "reason": "only regular files are kept in memory"}
        )
    problem = file_too_big(txn.quota, base.path, info.st_size)
    if problem:
        return base.model_copy(update={"status": "rejected", "reason": problem})
    before, _content = txn.state(parts, shown)
    if before is not None and _extends(txn, parts, shown, source, before, info.st_size):
        with source.open("rb") as f:
            f.seek(before.size)
            added = f.read(info.st_size - before.size + 1)
        if len(added) == info.st_size - before.size:
            _b, after, findings, refusal = txn.stage_append(parts, added, "append", shown)
            return _outcome(base, before, after, findings, refusal)
    content = source.read_bytes()
    after, findings, refusal = txn.stage_write(parts, content, "write", shown, before=before)
    return _outcome(base, before, after, findings, refusal)


def _outcome(
    base: StagedChangeResult,
    before: FileState | None,
    after: FileState,
    findings: list[Finding],
    refusal: str | None,
) -> StagedChangeResult:
    if refusal:
        return base.model_copy(
            update={"status": "rejected", "reason": refusal, "findings": tuple(findings)}
        )
    return base.model_copy(
        update={
            "sha256_before": None if before is None else before.sha,
            "sha256_after": after.sha,
            "bytes": after.size,
            "findings": tuple(findings),
        }
    )


def _extends(
    txn: Txn, parts: tuple[str, ...], shown: str, source: Path, before: FileState, size: int
) -> bool:
    """Whether ``source`` is the current version plus bytes at its end: sizes first,
    then the old bytes compared in place (no hash, no scan, no copy)."""
    if size <= before.size or before.size == 0 or txn.batch.root_fd is None:
        return False
    rel = "/".join(parts)
    if rel in txn.view or txn.batch.touches(rel):
        return False
    with _fs.opened_dir(txn.batch.root_fd, parts[:-1], create=False, shown=shown) as fd:
        if fd is None:
            return False
        live = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        try:
            upper = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                if os.fstat(live).st_size != before.size:
                    return False
                offset = 0
                while offset < before.size:
                    n = min(_CHUNK, before.size - offset)
                    if os.pread(live, n, offset) != os.pread(upper, n, offset):
                        return False
                    offset += n
                return True
            finally:
                os.close(upper)
        finally:
            os.close(live)
