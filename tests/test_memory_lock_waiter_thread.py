"""A process whose leader waits for a store's lock again and again (another process
holds it for each of its batches) waits in one thread, not a new thread per wait:
with four processes appending to one store, starting a thread for every wait cost
each of them about as much CPU as sleeping on the lock saved. The thread goes once
no wait has wanted it for a while."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from lw_temporal.memory import _commit
from lw_temporal.memory._commit import LockWaiter


def _waiting_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lw-store-lock"]


def _hold(state: Path) -> int:
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # an open file description of its own: another holder
    return fd


def test_one_thread_waits_for_every_batch(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    before = set(_waiting_threads())  # other tests' waiters, still about for a while
    waiter = LockWaiter(state)
    seen: list[threading.Thread] = []
    for _ in range(5):
        holder = _hold(state)
        assert waiter.wait(0.01) is None  # blocked behind the holder
        seen += [t for t in _waiting_threads() if t not in before]
        os.close(holder)  # the holder's batch is done: the waiting thread takes the lock
        fd = waiter.wait(5.0)
        assert fd is not None
        os.close(fd)
    assert len({id(t) for t in seen}) == 1, "a new thread for each wait"
    assert all(t is seen[0] for t in seen)


def test_the_thread_goes_when_unused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr(_commit, "_THREAD_IDLE", 0.05)
    before = set(_waiting_threads())
    waiter = LockWaiter(state)
    fd = waiter.wait(5.0)  # the lock is free: taken at once
    assert fd is not None
    os.close(fd)
    (thread,) = set(_waiting_threads()) - before
    thread.join(5.0)
    assert not thread.is_alive()
    fd = waiter.wait(5.0)  # and a later wait starts one again
    assert fd is not None
    os.close(fd)
