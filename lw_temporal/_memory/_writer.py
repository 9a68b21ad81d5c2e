"""Running mutations: group commit, planning in a batch, one flush, applying.

:class:`StoreWriter` is what every mutation of :class:`MemoryStores` goes through.
A mutation is a *body*: a function of a :class:`Txn` that checks the rules and stages
its changes, returning the result model. The writer queues it (:mod:`._commit`), and
the leading thread, holding the store's lock, first redoes whatever a crashed writer
left (:func:`recover`), then plans each queued body in order, commits the batch with
one journal flush, applies it, and hands out the results; a retried activity gets the
result its first attempt recorded instead (the idempotency ledger).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from .._definitions import MemoryQuota
from .._errors import INVALID_REQUEST, lw_error
from .._scan import Scanner
from .._scope import StoreRef
from . import _fs
from ._apply import apply_record, checkpoint, recover
from ._commit import GroupCommitter, Pending
from ._index import Usage, tree_id, tree_term
from ._journal import CHECKPOINT_BYTES, locked
from ._ledger import key_hash
from ._records import LedgerRecord, Provenance
from ._txn import Batch, Conflict, StoreFiles, Txn

_R = TypeVar("_R", bound=BaseModel)


class StoreWriter:
    """The mutation machinery of one data dir's stores."""

    def __init__(
        self,
        state: Callable[[StoreRef], Path],
        root: Callable[[StoreRef], Path],
        scanner: Scanner,
        quota: Callable[[StoreRef], MemoryQuota],
        lock_timeout: float,
    ) -> None:
        self._state = state
        self._root = root
        self.scanner = scanner
        self.quota = quota
        self.lock_timeout = lock_timeout
        self._committers: dict[StoreRef, GroupCommitter] = {}
        self._committers_lock = threading.Lock()

    def files(self, store: StoreRef) -> StoreFiles:
        return StoreFiles(store, self._root(store), self._state(store))

    def usage(self, files: StoreFiles, root_fd: int | None) -> Usage:
        found = files.index.read_usage()
        if found is None:
            found = self.count(files, root_fd)
            files.index.write_usage(found, sync=True)
        return self.with_bookkeeping(files, found)

    @staticmethod
    def with_bookkeeping(files: StoreFiles, usage: Usage) -> Usage:
        """``usage`` with what the store keeps beside its files that its quota counts
        too (the one place to add to): the search index's bytes and the store's own
        records (audit log, journal, ledger), which every change adds to."""
        usage.index = files.search.disk_bytes()
        usage.bookkeeping = files.bookkeeping_bytes()
        return usage

    @staticmethod
    def count(files: StoreFiles, root_fd: int | None) -> Usage:
        usage = Usage(versions=files.versions.total_bytes())
        if root_fd is None:
            return usage
        for rel, kind, size in _fs.walk_files(root_fd, ""):
            if kind == "dir":
                usage.dirs += 1
            elif kind == "file":
                parts = tuple(rel.split("/"))
                with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=rel) as fd:
                    state = None if fd is None else files.index.lookup(fd, parts[-1], rel, rel)[0]
                usage.live += size if state is None else state.size
                usage.files += 1
                if state is not None:
                    usage.tree += tree_term(rel, state.sha)
        return usage

    def _committer(self, store: StoreRef) -> GroupCommitter:
        with self._committers_lock:
            return self._committers.setdefault(store, GroupCommitter())

    def mutate(
        self,
        store: StoreRef,
        provenance: Provenance,
        op: str,
        body: Callable[[Txn], _R],
        result_type: type[_R],
        cancel: threading.Event | None,
        *,
        attachment: Any = None,
    ) -> _R:
        pending = Pending(body, cancel, op, attachment, provenance, result_type)
        committer = self._committer(store)
        files = self.files(store)

        def lead(take: Callable[[], list[Pending]]) -> None:
            with locked(files.state, str(store), cancel, self.lock_timeout):
                recover(files)
                items = take()
                try:
                    deferred = self._batch(files, items)
                except BaseException as err:
                    for item in items:
                        if not item.done.is_set():
                            item.fail(err)
                    raise
                committer.requeue(deferred)

        result: _R = committer.submit(pending, lead)
        return result

    def _batch(self, files: StoreFiles, items: list[Pending]) -> list[Pending]:
        """Plan, commit (one flush) and apply ``items``; returns those that must wait
        for the next batch."""
        root_fd = _fs.open_root(files.root, create=False, shown=str(files.store))
        batch = Batch(files, root_fd, Usage())
        try:
            batch.usage = self.usage(files, root_fd)
            batch.start_tree = tree_id(batch.usage.tree)
            staged: list[tuple[Pending, BaseModel]] = []
            for index, item in enumerate(items):
                try:
                    outcome = self._plan(batch, item)
                except Conflict:
                    if not staged:
                        raise
                    return items[index:] if self._finish(files, batch, staged) else []
                except Exception as err:
                    item.fail(err)
                    continue
                if isinstance(outcome, tuple):
                    staged.append(outcome)
                else:
                    item.succeed(outcome)
            self._finish(files, batch, staged)
            return []
        finally:
            if batch.root_fd is not None:
                os.close(batch.root_fd)

    def _plan(self, batch: Batch, item: Pending) -> BaseModel | tuple[Pending, BaseModel]:
        """Run one mutation's body in the batch: a replayed or no-op result, or the
        mutation staged into the batch."""
        files = batch.files
        provenance: Provenance = item.provenance
        key = provenance.idempotency_key
        hashed = None if key is None else key_hash(key)
        if hashed is not None:
            earlier = batch.keys.get(hashed)
            record = (
                LedgerRecord(op=earlier["op"], result=earlier["result"])
                if earlier is not None
                else files.ledger.get_hashed(hashed)
            )
            if record is not None:
                if record.op != item.op:
                    raise lw_error(
                        INVALID_REQUEST,
                        f"{provenance.who()}: activity {provenance.activity_id} already "
                        f"committed a {record.op!r} to {files.store}; it cannot also {item.op}",
                    )
                replayed: BaseModel = item.result_type.model_validate(record.result)
                return replayed.model_copy(update={"replayed": True})
        txn = Txn(batch, provenance, self.quota(files.store), self.scanner)
        result: BaseModel = item.run(txn)
        if not txn.ops and not txn.audit and not (item.attachment is not None and hashed):
            return result
        if txn.ops and batch.root_fd is None:
            batch.root_fd = _fs.open_root(files.root, create=True, shown=str(files.store))
        txn.merge(item.op, hashed, result.model_dump(mode="json"), item.attachment)
        return item, result

    def _finish(
        self, files: StoreFiles, batch: Batch, staged: list[tuple[Pending, BaseModel]]
    ) -> bool:
        """Commit the batch with one flush, apply it, and hand out the results. The
        journal counts toward the store's quota, so it is checkpointed (emptied) once
        it holds an eighth of the quota, not only past :data:`CHECKPOINT_BYTES`."""
        if not batch.commits:
            return True
        record = {"commits": batch.commits, "usage": batch.usage.as_json()}
        end = files.journal.commit(record)
        try:
            apply_record(files, batch.root_fd, record, states=batch.states, contents=batch.contents)
            # the search index follows in the same commit (it never raises: an index
            # left behind is repaired by the next search)
            files.search.follow(batch.root_fd, record, batch.contents, batch.start_tree)
            files.journal.mark(end)
        except (OSError, ApplicationError):
            recover(files)  # committed: finish it the way recovery would
        if end > min(CHECKPOINT_BYTES, self.quota(files.store).max_bytes // 8):
            checkpoint(files)
        for item, result in staged:
            item.succeed(result)
        return True
