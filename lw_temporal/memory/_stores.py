"""Memory stores with integrity: versions, audit, quotas, scanning, exactly-once.

This is the admin API (keyed by :class:`StoreRef`, paths relative to the store root)
that the ``lw.memory.*`` activities, bash commits, the CLI and dreaming's promotion all
go through. Each concern lives in its own module:

- :mod:`._journal`, :mod:`._apply`: the write-ahead journal, its lock and recovery
  (a mutation is either absent or complete, audit line and ledger entry included);
- :mod:`._commit`: group commit (concurrent mutations share one flush);
- :mod:`._txn`, :mod:`._rules`: planning a change against compare-and-set, quota and
  the scan, before anything is written;
- :mod:`._index`, :mod:`._versions`: the current-version index and the kept versions
  (reverse deltas: every change costs what it changed);
- :mod:`._ledger`, :mod:`._logfile`: the audit log and the idempotency ledger (the
  ledger and the version references are records in per-store logs, not files);
- :mod:`._reads`: reading files and listings without the lock;
- :mod:`._staged`, :mod:`._redact`, :mod:`._prune`, :mod:`._rename`: bash commits,
  redaction, retention, moves
  (the retention methods themselves, and :mod:`._names`'s resolution of what an
  operator types, are mixed into :class:`MemoryStores`);
- :mod:`._search` (mixed in too), :mod:`._searchquery`, :mod:`._searchmerge`, :mod:`._searchdb`,
  :mod:`._searchrows`, :mod:`._chunks`: search, and the index each commit keeps.

All bookkeeping lives under the layout's state dir (``stores/<kind>/<key>/``), never
inside a mounted folder. The methods are synchronous (they block on the lock and on
fsync); async callers run them in a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from .._changes import StoreChange
from .._definitions import MemoryQuota
from .._ids import DataLayout
from .._scan import DefaultScanner, Scanner
from .._scope import StoreKind, StoreRef
from ..errors._kinds import INVALID_REQUEST, MEMORY_NOT_FOUND, lw_error
from . import _fs
from ._apply import checkpoint
from ._fileops import FileOp, file_body, replacer
from ._history import StoreHistory
from ._journal import Cancelled, locked
from ._keep import StoreRetention
from ._names import STORE_FORMS, StoreNotFound, redaction_pattern
from ._quarantine import StoreQuarantine
from ._reads import list_files, read
from ._records import (
    ListResult,
    MutationResult,
    Provenance,
    ReadResult,
    RedactResult,
    StagedCommitResult,
)
from ._redact import redact_body
from ._rename import StoreMoves
from ._search import StoreSearch
from ._staged import staged_body
from ._txn import StoreFiles
from ._worker import WorkerConfig
from ._writer import StoreWriter

if TYPE_CHECKING:
    from ._gate import TaintGate

__all__ = ["STORE_FORMS", "Cancelled", "MemoryStores", "StoreNotFound"]

_R = TypeVar("_R", bound=BaseModel)


class MemoryStores(StoreHistory, StoreSearch, StoreMoves, StoreRetention, StoreQuarantine):
    """The memory stores of one data dir.

    Args:
        layout: the data dir layout.
        scanner: checks every new content before it is written; defaults to
            :class:`DefaultScanner` (blocks secrets, reports personal data).
        quota: the quota of a store; defaults to :class:`MemoryQuota` defaults.
        lock_timeout: seconds to wait for a store's lock before failing retryably.
    """

    def __init__(
        self,
        layout: DataLayout,
        *,
        scanner: Scanner | None = None,
        quota: Callable[[StoreRef], MemoryQuota] | None = None,
        lock_timeout: float = 300.0,
    ) -> None:
        self.layout = layout
        self.scanner: Scanner = scanner if scanner is not None else DefaultScanner()
        self._quota = quota or (lambda _store: MemoryQuota())
        self.lock_timeout = lock_timeout
        self._writer = StoreWriter(
            self.state_dir, self.root, self.scanner, self.quota, lock_timeout
        )
        self.gate: TaintGate | None = None  # see StoreQuarantine

    @classmethod
    def for_config(
        cls,
        config: WorkerConfig,
        *,
        scanner: Scanner | None = None,
        store_quota: MemoryQuota | None = None,
    ) -> MemoryStores:
        """Workflow stores take their definition's ``quota``; pipeline, org and
        dreaming stores take ``store_quota`` (default :class:`MemoryQuota`)."""
        default = store_quota or MemoryQuota()

        def quota(store: StoreRef) -> MemoryQuota:
            if store.kind is StoreKind.WORKFLOW and store.key in config.definitions:
                return config.definitions[store.key].quota
            return default

        return cls(config.layout, scanner=scanner, quota=quota)

    def quota(self, store: StoreRef) -> MemoryQuota:
        return self._quota(store)

    # -- locations ------------------------------------------------------------------
    def root(self, store: StoreRef) -> Path:
        return store.path(self.layout)

    def state_dir(self, store: StoreRef) -> Path:
        return self.layout.state / "stores" / store.kind.value / store.key

    def files(self, store: StoreRef) -> StoreFiles:
        return self._writer.files(store)

    # -- reads (no lock: a rewrite is atomic, an append only adds bytes at the end) --
    def read(
        self,
        store: StoreRef,
        path: str,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        shown: str | None = None,
    ) -> ReadResult:
        """A file's content and ``content_sha256``; ``exists=False`` if it is absent
        (including in a store never written). See :func:`._reads.read`."""
        return read(self.files(store), path, offset=offset, max_bytes=max_bytes, shown=shown)

    def list_files(
        self,
        store: StoreRef,
        path: str = "",
        *,
        recursive: bool = True,
        limit: int = 10_000,
        shown: str | None = None,
    ) -> ListResult:
        """Files and folders below ``path`` (store-relative); a missing store or folder
        lists as empty. Links are listed as ``link`` and never entered."""
        return list_files(
            self.root(store), path, recursive=recursive, limit=limit,
            shown=shown or f"{store}:{path}",
        )  # fmt: skip

    # -- mutations ----------------------------------------------------------------------
    def write(
        self,
        store: StoreRef,
        path: str,
        content: bytes,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Create or replace a file."""
        provenance, hold = self._route(store, provenance, path)
        if hold is not None:
            return hold.file_op(path, provenance, "write", shown, lambda _o: content, if_sha256)
        op = FileOp("write", path, shown or f"{store}:{path}", content, if_sha256=if_sha256)
        return self._file_op(store, op, provenance, cancel)

    def append(
        self,
        store: StoreRef,
        path: str,
        content: bytes,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Add ``content`` at the end of a file (creating it). It costs what it adds:
        the file is not read, re-hashed or copied, and only the added bytes (with the
        seam before them) are scanned (see :mod:`._fileops`)."""
        shown = shown or f"{store}:{path}"
        provenance, hold = self._route(store, provenance, path)
        if hold is not None:
            return hold.file_op(
                path, provenance, "append", shown, lambda old: (old or b"") + content,
                if_sha256, append=content,
            )  # fmt: skip
        op = FileOp("append", path, shown, content, if_sha256=if_sha256)
        return self._file_op(store, op, provenance, cancel)

    def replace(
        self,
        store: StoreRef,
        path: str,
        old: str,
        new: str,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Replace the single occurrence of ``old`` with ``new`` (``str_replace``)."""
        where = shown or f"{store}:{path}"
        op = FileOp("replace", path, where, old=old, new=new, if_sha256=if_sha256)
        provenance, hold = self._route(store, provenance, path)
        if hold is not None:
            edit = replacer(op, provenance)
            return hold.file_op(path, provenance, "replace", where, edit, if_sha256)
        return self._file_op(store, op, provenance, cancel)

    def restore(
        self,
        store: StoreRef,
        path: str,
        sha256: str,
        *,
        provenance: Provenance,
        shown: str | None = None,
    ) -> MutationResult:
        """Make a kept version the current content again (a new, audited version)."""
        content = self.blob(store, sha256)
        where = shown or f"{store}:{path}"
        if content is None:
            raise lw_error(
                MEMORY_NOT_FOUND,
                f"{where}: no kept version {sha256}; see versions() for what is kept",
            )
        op = FileOp("write", path, where, content)
        body = file_body(op, provenance, lambda _b: content, scan=False, name="restore")
        return self._writer.mutate(store, provenance, "restore", body, MutationResult, None)

    def _file_op(
        self,
        store: StoreRef,
        op: FileOp,
        provenance: Provenance,
        cancel: threading.Event | None,
    ) -> MutationResult:
        """A file mutation any process holding the store's lock may commit."""
        return self._writer.mutate(
            store, provenance, op.kind, op.body(provenance), MutationResult, cancel, request=op
        )

    def delete(
        self,
        store: StoreRef,
        path: str,
        *,
        provenance: Provenance,
        recursive: bool = False,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Remove a file, or a folder with everything in it when ``recursive``."""
        where = shown or f"{store}:{path}"
        provenance, hold = self._route(store, provenance, path)
        if hold is not None:
            return hold.delete(path, provenance, recursive, if_sha256, where)
        op = FileOp("delete", path, where, if_sha256=if_sha256, recursive=recursive)
        return self._file_op(store, op, provenance, cancel)

    def commit_staged(
        self,
        store: StoreRef,
        changes: Sequence[StoreChange],
        provenance: Provenance,
        *,
        attachment: Any = None,
        cancel: threading.Event | None = None,
        heartbeat: Callable[[], None] | None = None,
        since: int | None = None,
    ) -> StagedCommitResult:
        """Apply one bash command's changes to one store, all or nothing.

        Deletes are applied first, then folders made, then files written. If any
        change breaks the quota, the scan or the path rules, nothing is applied (the
        store keeps its previous versions) and the result says why, per path. When
        applied, each file gets a version and an audit line with ``provenance``. A
        file the command only appended to costs what it appended (see
        :func:`._staged.stage_change`). ``attachment`` (JSON-able, e.g. the
        command's own result) is kept in the idempotency ledger with the commit, for
        :meth:`recorded`. ``heartbeat`` is called as the changes are checked.
        ``since`` (the audit log's size before the command started): a path that
        another writer changed after it refuses all the changes (see
        :func:`._staged.staged_body`).
        """
        provenance, hold = self._route(store, provenance, *(c.path for c in changes))
        if hold is not None:
            return hold.staged(changes, provenance)
        body = staged_body(store, changes, heartbeat, since)
        return self._writer.mutate(
            store, provenance, "bash", body, StagedCommitResult, cancel, attachment=attachment
        )

    def redact(
        self,
        store: StoreRef,
        path: str,
        pattern: str,
        *,
        provenance: Provenance,
        regex: bool = False,
        replacement: str = "[REDACTED]",
        shown: str | None = None,
    ) -> RedactResult:
        """Remove ``pattern`` (a literal, or a regex when ``regex``) from a file and from
        every kept version of it, deltas included (see :mod:`._redact`). Redacted
        versions get new content addresses; the old addresses redirect to them, so the
        audit log (append-only) stays resolvable."""
        shown = shown or f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        if not parts:
            raise lw_error(INVALID_REQUEST, f"{shown} is a folder; name a file")
        compiled = redaction_pattern(pattern, regex=regex)
        files = self.files(store)
        rel = "/".join(parts)
        names = self._renamed(store, rel)  # the file under every name a move gave it
        version_shas = list(dict.fromkeys(s for n in names for s in self._version_shas(store, n)))
        if not version_shas and self.read_bytes(store, rel) is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{shown} does not exist and has no kept versions")
        # each name that is a file now is rewritten too (the one named last)
        live = [n for n in names if n != rel and self.read_bytes(store, n) is not None]
        mapping: dict[str, str] = {}
        self.mark_purge(files)  # a redaction killed after its commit is purged later
        for name in [*live, rel]:
            body = redact_body(
                files, tuple(name.split("/")), shown if name == rel else f"{store}:{name}",
                compiled, replacement.encode(), version_shas, lambda sha: self.blob(store, sha),
            )  # fmt: skip
            result = self._writer.mutate(store, provenance, "redact", body, RedactResult, None)
            mapping |= result.versions_redacted
        self.empty_journal(store, purge_search=True)  # both held the old bytes until now
        return result.model_copy(update={"versions_redacted": mapping})

    def _renamed(self, store: StoreRef, rel: str) -> list[str]:
        """``rel`` and every name its file had or got by a rename (``detail.from`` and
        ``detail.to`` of the audit log), ``rel`` first."""
        links: dict[str, set[str]] = {}
        for entry in self.audit(store):
            other = (entry.detail or {}).get("from") or (entry.detail or {}).get("to")
            if entry.op == "rename" and other:
                links.setdefault(entry.path, set()).add(other)
                links.setdefault(other, set()).add(entry.path)
        names, todo = [rel], [rel]
        while todo:
            for other in sorted(links.get(todo.pop(), ())):
                if other not in names:
                    names.append(other)
                    todo.append(other)
        return names

    def empty_journal(self, store: StoreRef, *, purge_search: bool = False) -> None:
        """Checkpoint ``store``: its journal, whose records hold the bytes of the
        changes since the last checkpoint, is emptied (and, with ``purge_search``, the
        search index's freed pages too), so that what a redaction or a revert took
        back is not kept there."""
        files = self.files(store)
        with locked(files.state, str(store), None, self.lock_timeout):
            if purge_search:
                self.finish_purge(files)
            else:
                checkpoint(files)
