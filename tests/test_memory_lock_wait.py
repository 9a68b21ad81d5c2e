"""A writer waiting for a store that another holder has locked gives up when cancelled
(nothing written, and the lock free for others once the holder lets go) and fails
retryably when the wait outlasts its limit."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from lw_temporal._locks import lock_exclusive
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.memory._stores import Cancelled

STORE = StoreRef(StoreKind.ORG, "org")


def _hold_lock(stores: MemoryStores) -> int:
    state = stores.state_dir(STORE)
    state.mkdir(parents=True, exist_ok=True)
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # an open file description of its own: another holder
    return fd


def _lock_free_soon(stores: MemoryStores) -> bool:
    """Whether another open file can take the store's lock within a few seconds."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        fd = os.open(stores.state_dir(STORE) / "lock", os.O_RDWR)
        try:
            lock_exclusive(fd, blocking=False)
            return True
        except BlockingIOError:
            time.sleep(0.01)
        finally:
            os.close(fd)
    return False


def test_cancelled_wait_writes_nothing(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    fd = _hold_lock(stores)
    cancel = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            stores.write(STORE, "a.md", b"late", provenance=Provenance.admin("t"), cancel=cancel)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(timeout=0.5)
    assert thread.is_alive(), "the writer must wait while the lock is held"
    cancel.set()
    thread.join(timeout=30)
    os.close(fd)  # the holder lets go: the writer's wait in the kernel now takes the lock
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
    # that wait cannot be interrupted, so it takes the lock for nobody: it must let go
    # at once, not keep it from every other process
    assert _lock_free_soon(stores), "a lock taken for a writer that gave up was kept"
    assert not stores.read(STORE, "a.md").exists
    assert stores.audit(STORE) == []


def test_wait_past_the_limit_is_retryable(data_dir: Path) -> None:
    stores = MemoryStores(DataLayout.at(data_dir), lock_timeout=0.3)
    fd = _hold_lock(stores)
    try:
        with pytest.raises(ApplicationError) as err:
            stores.append(STORE, "a.md", b"x", provenance=Provenance.admin("t"))
    finally:
        os.close(fd)
    assert err.value.type == "LwMemoryBusy" and not err.value.non_retryable
    stores.append(STORE, "a.md", b"x", provenance=Provenance.admin("t"))
    assert stores.read(STORE, "a.md").content == "x"
