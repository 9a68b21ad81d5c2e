"""Running mutations: group commit, planning in a batch, one flush, applying.

:class:`StoreWriter` is what every mutation of :class:`MemoryStores` goes through.
A mutation is a *body*: a function of a :class:`Txn` that checks the rules and stages
its changes, returning the result model. The writer queues it (:mod:`._commit`), and
the leading thread, holding the store's lock, first redoes whatever a crashed writer
left (:func:`recover`), then plans each queued body in order (with the requests other
processes spooled, :mod:`._spool`), commits the batch with one journal flush, applies
it, and hands out the results; a retried activity gets the result its first attempt
recorded instead (the idempotency ledger).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from .._definitions import MemoryQuota
from .._scan import Scanner
from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, lw_error
from . import _fs, _spool
from ._apply import apply_record, checkpoint, recover
from ._commit import GroupCommitter, Pending
from ._fileops import FileOp
from ._index import Usage, tree_id, tree_term
from ._journal import CHECKPOINT_BYTES, try_lock
from ._ledger import key_hash
from ._records import LedgerRecord, MutationResult, Provenance
from ._spool import GATHER_SECONDS, Spool, outcome_of, scanner_fingerprint
from ._txn import Batch, Conflict, StoreFiles, Txn

_R = TypeVar("_R", bound=BaseModel)

#: Batches one hold of the lock commits beyond the first, while requests keep coming.
EXTRA_ROUNDS = 2


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
        self._files: dict[StoreRef, StoreFiles] = {}
        self._committers_lock = threading.Lock()
        self._pid = os.getpid()
        #: Requests of processes whose scanner has this fingerprint can be committed
        #: here, and this one's there (``None``: a scanner of the user's own).
        self.fingerprint = scanner_fingerprint(scanner)

    def files(self, store: StoreRef) -> StoreFiles:
        files = self._files.get(store)
        if files is None:
            files = StoreFiles(store, self._root(store), self._state(store))
            if len(self._files) >= 1024:
                self._files.clear()
            self._files[store] = files
        return files

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
        if self._pid != os.getpid():  # forked: the parent's queues, threads and spares
            self._committers, self._committers_lock = {}, threading.Lock()
            self._pid = os.getpid()
        with self._committers_lock:
            committer = self._committers.get(store)
            if committer is None:
                spool = (
                    None
                    if self.fingerprint is None
                    else Spool(self._state(store), self.fingerprint)
                )
                committer = self._committers[store] = GroupCommitter(
                    spool, str(store), self._state(store)
                )
            return committer

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
        request: FileOp | None = None,
    ) -> _R:
        """Commit ``body`` with whatever else is queued. ``request`` is its data form:
        with it (and an idempotency key, so a commit redone after a crash is found in
        the ledger) another process holding the lock may commit it for this one."""
        spoolable = attachment is None and provenance.idempotency_key is not None
        pending = Pending(
            body, cancel, op, attachment, provenance, result_type, self.quota(store),
            request if spoolable else None, time.monotonic() + self.lock_timeout,
        )  # fmt: skip
        files = self.files(store)
        result: _R = self._committer(store).submit(pending, lambda c: self._lead(files, c))
        return result

    def _lead(self, files: StoreFiles, committer: GroupCommitter) -> None:
        """One step of leading: commit everything if the store's lock is free, else
        spool and collect outcomes."""
        fd = None if committer.waiter.busy else try_lock(files.state)
        if fd is None:
            fd = committer.wait_step()
            if fd is None:
                return
            committer.collect(now=time.monotonic())  # what the last holder did for us
            if committer.idle():
                os.close(fd)
                return
        try:
            recover(files)
            self._commit_queued(files, committer)
        finally:
            os.close(fd)
        committer.collect(now=time.monotonic())  # what another holder committed for us

    def _commit_queued(self, files: StoreFiles, committer: GroupCommitter) -> None:
        """Under the lock: this process's queue and the spool's requests, in batches
        until none is left; each spooled request's outcome is written back. Requests
        spooled while a batch was committed are committed too, in up to
        :data:`EXTRA_ROUNDS` more batches of the same hold (each answered at once: their
        requesters find their outcomes without the lock), rather than each waiting
        for the lock to pass to another process and back."""
        spool = committer.usable_spool
        for round_ in range(EXTRA_ROUNDS + 1):
            items = committer.take()
            if round_ and not items and (spool is None or not spool.waiting()):
                return
            if not self._commit_round(files, committer, items, gather=not round_):
                return

    def _commit_round(
        self, files: StoreFiles, committer: GroupCommitter, items: list[Pending], *, gather: bool
    ) -> bool:
        """One batch's worth: ``items`` and the spool's requests (waited for a little
        with ``gather``). False if it failed (each mutation got the error)."""
        remote: list[tuple[str, Pending]] = []
        own: list[str] = []
        spool = committer.usable_spool
        if spool is not None and not self._claim(committer, spool, items, remote, own, gather):
            spool = None
        try:
            while items:
                items = self._batch(files, items)
        except BaseException as err:
            for item in items:
                if not item.done.is_set():
                    item.fail(err)
            if not remote:
                raise
            return False
        finally:
            if spool is not None:
                # a claim whose outcome cannot be written (or retired) stays claimed:
                # the next holder commits it again, the ledger returns the same result
                for rid, item in remote:
                    with suppress(OSError):
                        spool.answer(rid, outcome_of(item.result, item.error))
                for rid in own:
                    with suppress(OSError):
                        spool.drop(rid, outcome=True)
        return True

    @staticmethod
    def _claim(
        committer: GroupCommitter,
        spool: Spool,
        items: list[Pending],
        remote: list[tuple[str, Pending]],
        own: list[str],
        gather: bool,
    ) -> bool:
        """Add the spool's requests to ``items`` (``remote``: other processes', with
        the pending that stands for each; ``own``: this process's, by id). False if the
        spool cannot be used: then nothing was taken, and this process's own commit."""
        if gather and committer.peers:
            spool.gather(committer.peers, GATHER_SECONDS)
        try:
            requests, broken = spool.claim()
        except OSError as err:
            committer.spool_failed(err)
            return False
        except BaseException:
            committer.requeue(items)  # for the next leader (this one's own fails)
            raise
        committer.peers = len({r.process for r in requests} - {_spool.PROCESS})
        for rid, why in broken:
            with suppress(OSError):  # else answered by the next holder
                spool.answer(rid, outcome_of(None, lw_error(INVALID_REQUEST, f"unreadable: {why}")))
        for rid in spool.left:  # this process's own, it commits without the spool
            mine = committer.reclaim(rid)
            if mine is not None:
                items.append(mine)
        for request in requests:
            mine = committer.claimed(request.id)
            if mine is not None:
                items.append(mine)
                own.append(request.id)
                continue
            item = Pending(
                _refused, None, request.op.kind, None, request.provenance, MutationResult,
                request.quota,
            )  # fmt: skip
            try:
                item.run = request.op.body(request.provenance)
            except Exception as err:  # a path refused before planning
                item.fail(err)
            else:
                items.append(item)
            remote.append((request.id, item))
        return True

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
        txn = Txn(batch, provenance, item.quota or self.quota(files.store), self.scanner)
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


def _refused(_txn: Txn) -> Any:
    raise AssertionError("a request whose body could not be built is never planned")
