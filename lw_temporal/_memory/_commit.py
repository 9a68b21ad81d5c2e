"""Group commit: concurrent mutations of one store share one lock and one flush.

Each mutation joins its store's queue; one of the waiting threads leads: it takes the
store's lock (``_locks``, so other worker processes wait their turn), plans every
queued mutation in order against the others' planned changes, commits them all with a
single journal flush, applies them, and hands each its result. The others find their
result ready when they get their turn, having done nothing twice. A mutation that
conflicts with an earlier one in the batch (it needs a file's whole content that the
batch already changed) waits for the next batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._journal import Cancelled

_POLL = 0.02


@dataclass(eq=False)
class Pending:
    """One mutation waiting for its batch."""

    run: Callable[[Any], Any]
    cancel: threading.Event | None
    op: str
    attachment: Any
    provenance: Any
    result_type: Any
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


class GroupCommitter:
    """The queue of one store (in one :class:`MemoryStores`)."""

    def __init__(self) -> None:
        self._queue: deque[Pending] = deque()
        self._mutex = threading.Lock()
        self._leader = threading.Lock()

    def submit(self, pending: Pending, lead: Callable[[Callable[[], list[Pending]]], None]) -> Any:
        """Queue ``pending`` and wait for its result, leading batches while it waits.
        ``lead`` takes the lock and calls the given function to take the queued
        mutations once it holds it."""
        with self._mutex:
            self._queue.append(pending)
        while not pending.done.is_set():
            if not self._leader.acquire(timeout=_POLL):
                if (
                    pending.cancel is not None
                    and pending.cancel.is_set()
                    and self._withdraw(pending)
                ):
                    raise Cancelled()
                continue
            try:
                if pending.done.is_set():
                    break
                try:
                    lead(self._take)
                except BaseException:
                    if self._withdraw(pending):
                        raise
                    if not pending.done.is_set():
                        raise
            finally:
                self._leader.release()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _take(self) -> list[Pending]:
        with self._mutex:
            items = list(self._queue)
            self._queue.clear()
            for item in items:
                item.taken = True
        return items

    def requeue(self, items: list[Pending]) -> None:
        """Put mutations a batch could not take back at the head of the queue."""
        with self._mutex:
            for item in reversed(items):
                item.taken = False
                self._queue.appendleft(item)

    def _withdraw(self, pending: Pending) -> bool:
        with self._mutex:
            if pending.taken or pending.done.is_set():
                return False
            self._queue.remove(pending)
            return True
