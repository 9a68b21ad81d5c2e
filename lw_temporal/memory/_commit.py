"""Group commit: concurrent mutations of one store share one lock and one flush.

Each mutation joins its store's queue in this process; one of the waiting threads
leads. When the store's lock (``_locks``, held across worker processes and hosts) is
free, the leader takes it and commits every queued mutation, and every request other
processes left in the store's spool (:mod:`._spool`), in one batch: planned in order
against each other's changes, one journal flush, applied, each handed its result. When
another process holds the lock, the leader moves what can be spooled into the spool
(that process, or the next holder, commits it with its batch) and collects the
outcomes that arrive, until its own mutation is done or the lock is free. Meanwhile it
sleeps in the kernel on the lock (:class:`LockWaiter`): the holder answers what it
committed before it releases the lock, so the release is what wakes the waiter. A mutation
that conflicts with an earlier one in the batch (it needs a file's whole content that
the batch already changed) waits for the next batch.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._locks import lock_exclusive
from ..errors._kinds import MEMORY_BUSY, lw_error
from ._journal import Cancelled, open_lock
from ._spool import Spool, error_of

_POLL = 0.02
#: Longest a waiting leader sleeps on the lock before it looks for outcomes, its
#: cancellation and its deadline again (a network file system may grant a blocked lock
#: late: the outcome file is looked at meanwhile).
_WAIT_CAP = 0.005
#: How long a lock-waiting thread with nothing to wait for stays for the next wait.
_THREAD_IDLE = 1.0
#: How long a spool that failed goes unused: meanwhile this process's mutations wait
#: for the store's lock, as those that cannot be spooled always do.
SPOOL_REST = 5.0

_log = logging.getLogger(__name__)


class LockWaiter:
    """Waits in the kernel for a store's lock for this process's leader, in a thread
    of its own, so that a leader whose store another process holds sleeps until the
    lock is released instead of polling it (with four processes appending to one
    store, the lock attempts of that polling alone, an open, a try and a close each,
    cost each process about 0.3 ms of CPU per append). The wait cannot be interrupted,
    so it outlives a leader that stops wanting the lock (its mutation done or given
    up): a lock taken for nobody is released at once."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self._mutex = threading.Lock()
        self._asked = threading.Condition(self._mutex)
        self._ready = threading.Event()
        self._fd: int | None = None
        self._blocked = False
        self._wanted = False
        #: The waiting thread is running (it stays a while for the next wait: starting
        #: a thread for each one cost each of four appending processes about as much
        #: CPU as the wait saved).
        self._running = False

    def wait(self, timeout: float) -> int | None:
        """The lock's descriptor (close it to release) if it was taken within
        ``timeout``, else ``None`` while the wait goes on."""
        with self._mutex:
            self._wanted = True
            if self._fd is None and not self._blocked:
                self._blocked = True
                if self._running:
                    self._asked.notify()
                else:
                    self._running = True
                    threading.Thread(target=self._serve, daemon=True, name="lw-store-lock").start()
        if not self._ready.wait(timeout):
            return None
        with self._mutex:
            fd, self._fd = self._fd, None
            self._ready.clear()
            return fd

    @property
    def busy(self) -> bool:
        """The thread is waiting for the lock, or took it and nobody collected it yet
        (then trying the lock with another descriptor would only fail)."""
        with self._mutex:
            return self._blocked or self._fd is not None

    def unwanted(self) -> None:
        """This process needs the lock no more for now: a lock the thread took and
        nobody collected is released."""
        with self._mutex:
            self._wanted = False
            fd, self._fd = self._fd, None
            self._ready.clear()
        if fd is not None:
            os.close(fd)

    def _serve(self) -> None:
        """Block for the lock each time a wait asks, until none has for a while."""
        while True:
            with self._mutex:
                if not self._asked.wait_for(lambda: self._blocked, timeout=_THREAD_IDLE):
                    self._running = False
                    return
            self._block()

    def _block(self) -> None:
        fd: int | None = None
        try:
            fd = open_lock(self.state)
            lock_exclusive(fd)
        except OSError:  # the store's state is gone or unreadable: the leader finds out
            if fd is not None:
                os.close(fd)
            fd = None
        with self._mutex:
            self._blocked = False
            if fd is not None and not self._wanted:
                os.close(fd)
                return
            self._fd = fd
            self._ready.set()


@dataclass(eq=False)
class Pending:
    """One mutation waiting for its batch. ``request`` is its data form when another
    process may commit it (a :class:`._fileops.FileOp`), ``quota`` the rules it
    passes wherever it is committed."""

    run: Callable[[Any], Any]
    cancel: threading.Event | None
    op: str
    attachment: Any
    provenance: Any
    result_type: Any
    quota: Any = None
    request: Any = None
    deadline: float = float("inf")
    taken: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None

    def succeed(self, result: Any) -> None:
        self.result = result
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()

    def settle(self, outcome: dict[str, Any]) -> None:
        """Take up the outcome another process wrote for this mutation."""
        if "ok" in outcome:
            self.succeed(self.result_type.model_validate(outcome["ok"]))
        else:
            self.fail(error_of(outcome.get("error") or {}))


class GroupCommitter:
    """The queue of one store in one process, and what it has spooled."""

    def __init__(self, spool: Spool | None, store: str, state: Path) -> None:
        self.spool = spool
        self.store = store
        self.waiter = LockWaiter(state)
        self._queue: deque[Pending] = deque()
        #: Mutations in the spool, by request id, until their outcome arrives.
        self._spooled: dict[str, Pending] = {}
        self._mutex = threading.Lock()
        self._leader = threading.Lock()
        self._delay = 0.00005
        #: Other processes whose requests the last batch this process led held.
        self.peers = 0
        #: Until when the spool goes unused (it failed: see :meth:`spool_failed`).
        self._spool_rest = float("-inf")

    @property
    def usable_spool(self) -> Spool | None:
        """The spool, unless it failed within the last :data:`SPOOL_REST` seconds."""
        return self.spool if time.monotonic() >= self._spool_rest else None

    def spool_failed(self, err: OSError) -> None:
        """The spool cannot be used (something is in the way of its folder, or the
        folder cannot be listed or written): this process commits its mutations
        itself for a while, and says so once per spell."""
        resting = time.monotonic() < self._spool_rest
        self._spool_rest = time.monotonic() + SPOOL_REST
        if not resting:
            where = "(none)" if self.spool is None else self.spool.dir
            _log.warning(
                "store %s: its spool %s cannot be used (%s); this worker's mutations of "
                "it wait for the store's lock instead of being committed by another "
                "process (slower with several processes); remove what is in the way",
                self.store, where, err,
            )  # fmt: skip

    def submit(self, pending: Pending, lead: Callable[[GroupCommitter], None]) -> Any:
        """Queue ``pending`` and wait for its result, leading while it waits: ``lead``
        is one step (commit what is queued if the store's lock is free, else spool and
        collect outcomes)."""
        with self._mutex:
            self._queue.append(pending)
        try:
            self._wait_for(pending, lead)
        finally:
            if self.idle():
                self.waiter.unwanted()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _wait_for(self, pending: Pending, lead: Callable[[GroupCommitter], None]) -> None:
        while not pending.done.is_set():
            if pending.cancel is not None and pending.cancel.is_set() and self.withdraw(pending):
                raise Cancelled()
            if not self._leader.acquire(timeout=_POLL):
                continue
            try:
                if pending.done.is_set():
                    break
                try:
                    lead(self)
                except BaseException:
                    if self.withdraw(pending):
                        raise
                    if not pending.done.is_set():
                        raise
            finally:
                self._leader.release()

    # -- the leader's side ------------------------------------------------------------
    def take(self) -> list[Pending]:
        """Every queued mutation, for a batch under the store's lock."""
        with self._mutex:
            items = list(self._queue)
            self._queue.clear()
            for item in items:
                item.taken = True
        self._delay = 0.00005
        return items

    def claimed(self, rid: str) -> Pending | None:
        """This process's own spooled mutation, claimed from the spool by its leader."""
        with self._mutex:
            item = self._spooled.pop(rid, None)
            if item is not None:
                item.taken = True
            return item

    def reclaim(self, rid: str) -> Pending | None:
        """This process's own spooled mutation that its leader's claim could not take
        (see :meth:`._spool.Spool.claim`): taken back from the spool, to be committed
        in the leader's batch. Failed (retryably) if the spool cannot give it back
        either: then a later holder may still commit it, and the activity's retry
        finds that in the idempotency ledger."""
        with self._mutex:
            item = self._spooled.get(rid)
        if item is None or self.spool is None:
            return None
        try:
            withdrawn = self.spool.withdraw(rid)
        except OSError as err:
            with self._mutex:
                self._spooled.pop(rid, None)
            item.fail(
                lw_error(
                    MEMORY_BUSY,
                    f"store {self.store}: its spool could neither take nor give back this "
                    f"mutation ({err}); check the store's state folder (this is retried)",
                )
            )
            return None
        with self._mutex:
            if not withdrawn or self._spooled.pop(rid, None) is None:
                return None
            item.taken = True
        return item

    def requeue(self, items: list[Pending]) -> None:
        """Put mutations a batch could not take back at the head of the queue."""
        with self._mutex:
            for item in reversed(items):
                item.taken = False
                self._queue.appendleft(item)

    def idle(self) -> bool:
        """Nothing of this process waits for the store (queued or spooled)."""
        with self._mutex:
            return not self._queue and not self._spooled

    def wait_step(self) -> int | None:
        """While another process holds the lock: spool what may be, take up outcomes,
        give up on what waited too long, then wait on the lock a little. Returns the
        lock's descriptor once it is this process's, else ``None``."""
        spool = self.usable_spool
        now = time.monotonic()
        with self._mutex:
            queued = list(self._queue)
            spooled = list(self._spooled.items())
        for item in queued:
            if spool is not None and item.request is not None:
                try:
                    rid = spool.submit(item.request, item.provenance, item.quota)
                except OSError as err:
                    self.spool_failed(err)
                    spool = None
                else:
                    with self._mutex:
                        if item in self._queue:
                            self._queue.remove(item)
                            self._spooled[rid] = item
                            continue
                    spool.withdraw(rid)  # withdrawn meanwhile (cancelled)
                    continue
            if now > item.deadline and self.withdraw(item):
                item.fail(self.busy())
        self.collect(spooled, now)
        fd = self.waiter.wait(self._delay)
        self._delay = min(self._delay * 2, _WAIT_CAP)
        return fd

    def collect(self, spooled: list[tuple[str, Pending]] | None = None, now: float = 0.0) -> None:
        """Take up the outcomes other processes wrote for this one's spooled mutations
        (and give up on those that waited too long, unless already claimed)."""
        if self.spool is None:
            return
        if spooled is None:
            with self._mutex:
                spooled = list(self._spooled.items())
        for rid, item in spooled:
            outcome = self.spool.outcome(rid)
            if outcome is not None:
                with self._mutex:
                    self._spooled.pop(rid, None)
                item.settle(outcome)
            elif now > item.deadline and self.withdraw(item):
                item.fail(self.busy())

    def busy(self) -> Exception:
        return lw_error(
            MEMORY_BUSY,
            f"store {self.store} stayed locked past the wait limit; another writer "
            "holds it (this is retried)",
        )

    def withdraw(self, pending: Pending) -> bool:
        """Take back a mutation no batch has taken (queued, or spooled and unclaimed)."""
        with self._mutex:
            if pending.taken or pending.done.is_set():
                return False
            if pending in self._queue:
                self._queue.remove(pending)
                return True
            rid = next((r for r, p in self._spooled.items() if p is pending), None)
            if rid is None or self.spool is None or not self.spool.withdraw(rid):
                return False
            del self._spooled[rid]
            return True
