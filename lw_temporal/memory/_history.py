"""What a store has kept, as :class:`MemoryStores` methods (a mixin): kept versions,
the audit log, the exactly-once ledger, and the usage its quota counts."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, lw_error
from . import _fs
from ._apply import recover
from ._index import Usage, tree_id
from ._journal import locked
from ._reads import read_bytes
from ._records import (
    AuditEntry,
    LedgerRecord,
    Provenance,
    VersionInfo,
)
from ._rules import SHA
from ._txn import StoreFiles
from ._versions import history, sha256
from ._writer import StoreWriter


class StoreHistory:
    """Versions, audit, ledger and usage of the stores (it needs ``_writer``,
    ``lock_timeout``, ``files`` and ``root`` of :class:`MemoryStores`, and the held
    ledger records of its quarantine)."""

    _writer: StoreWriter
    lock_timeout: float

    def files(self, store: StoreRef) -> StoreFiles:
        raise NotImplementedError

    def root(self, store: StoreRef) -> Path:
        raise NotImplementedError

    if TYPE_CHECKING:  # the quarantine's (``_quarantine.StoreQuarantine``)

        def _held_record(self, store: StoreRef, provenance: Provenance) -> LedgerRecord | None: ...

    # -- versions, audit, ledger ------------------------------------------------------
    def blob(self, store: StoreRef, sha256: str) -> bytes | None:
        """A kept version's content by its sha256 (following redaction redirects)."""
        if not SHA.fullmatch(sha256):
            raise lw_error(INVALID_REQUEST, f"{sha256!r} is not a sha256 hex digest")
        files = self.files(store)
        return files.versions.get(sha256, self._live_reader(store))

    def _live_reader(self, store: StoreRef) -> Callable[[str, str], bytes | None]:
        def live(rel: str, sha: str) -> bytes | None:
            try:
                data = self.read_bytes(store, rel)
            except Exception:
                return None
            return data if data is not None and sha256(data) == sha else None

        return live

    def read_bytes(self, store: StoreRef, rel: str) -> bytes | None:
        """A file's whole current content (``None`` if absent); links refused."""
        return read_bytes(self.root(store), rel, str(store))

    def versions(self, store: StoreRef, path: str) -> list[VersionInfo]:
        """The kept versions of one file, oldest first."""
        rel = "/".join(_fs.clean_relative(path, f"{store}:{path}"))
        return history(
            self.files(store).versions, self.audit(store, path=rel), self._live_reader(store)
        )

    def _version_shas(self, store: StoreRef, rel: str) -> list[str]:
        shas: list[str] = []
        for entry in self.audit(store, path=rel):
            shas += [s for s in (entry.sha256_before, entry.sha256_after) if s is not None]
        return list(dict.fromkeys(shas))

    def audit(self, store: StoreRef, *, path: str | None = None) -> list[AuditEntry]:
        """The store's audit log, oldest first (optionally for one path)."""
        return self.files(store).audit.read(path=path)

    def audit_since(self, store: StoreRef, offset: int) -> tuple[list[tuple[int, AuditEntry]], int]:
        """The audit entries after byte ``offset`` of the log, with their offsets, and
        the offset to ask from next time: a reader that keeps it pays for new entries."""
        return self.files(store).audit.read_since(offset)

    def recorded(self, store: StoreRef, provenance: Provenance) -> LedgerRecord | None:
        """What the activity of ``provenance`` already committed to ``store``, if any:
        a retried activity returns this instead of acting again."""
        key = provenance.idempotency_key
        if key is None:
            return None
        if (held := self._held_record(store, provenance)) is not None:
            return held
        files = self.files(store)
        if files.journal.pending() is not None:
            # a crashed commit is rolled forward first: its ledger record may be in
            # while its audit lines are not yet
            with locked(files.state, str(store), None, self.lock_timeout):
                recover(files)
        return files.ledger.get(key)

    def prune_ledger(self, store: StoreRef, older_than: timedelta) -> int:
        """Forget exactly-once records older than ``older_than`` (longer than any
        activity's retries can last); returns how many were removed."""
        files = self.files(store)
        with locked(files.state, str(store), None, self.lock_timeout):
            recover(files)
            return files.ledger.prune(older_than)

    def usage(self, store: StoreRef) -> Usage:
        """What the store holds on disk: current files, kept versions and its own
        records (the bytes its quota counts), files and folders, and its tree id."""
        files = self.files(store)
        found = files.index.read_usage()
        if found is None and not files.root.exists() and not files.state.exists():
            return Usage()  # never written: empty, and nothing is created to say so
        if found is None or files.journal.pending() is not None:
            with locked(files.state, str(store), None, self.lock_timeout):
                recover(files)
                root_fd = _fs.open_root(files.root, create=False, shown=str(store))
                try:
                    found = self._writer.usage(files, root_fd)
                finally:
                    if root_fd is not None:
                        os.close(root_fd)
        return self._writer.with_bookkeeping(files, found)

    def snapshot_id(self, store: StoreRef, *, wait: bool = True) -> str | None:
        """A content hash of the store's tree (the set of its files' paths and
        sha256s), read from the usage record, not computed from the files. Without
        ``wait`` it never takes the lock: ``None`` if the store has files it has not
        counted yet (made by hand, before any mutation through the store)."""
        if wait:
            return tree_id(self.usage(store).tree)
        files = self.files(store)
        found = files.index.read_usage()
        if found is not None:
            return tree_id(found.tree)
        return None if files.root.exists() else tree_id(0)

    def recount(self, store: StoreRef) -> dict[str, int]:
        """Recompute the usage counters from the files (after edits made outside);
        returns the current files' bytes and count."""
        files = self.files(store)
        with locked(files.state, str(store), None, self.lock_timeout):
            recover(files)
            root_fd = _fs.open_root(files.root, create=False, shown=str(store))
            try:
                usage = self._writer.count(files, root_fd)
            finally:
                if root_fd is not None:
                    os.close(root_fd)
            files.index.write_usage(usage, sync=True)
        return {"bytes": usage.live, "files": usage.files}
