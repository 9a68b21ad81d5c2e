"""A store's write-ahead journal, its lock, and crash recovery.

Every batch of mutations of a store becomes one JSON line appended to
``journal.log`` and flushed with one ``fdatasync``: that flush is the commit point,
shared by every mutation in the batch. Applying the batch afterwards (the files, the
version objects, the audit lines, the ledger, the usage counters) is done without
fsync, and ``applied`` records how far the journal has been applied and in which boot:

- a process that dies while applying leaves ``applied`` behind the journal's end, and
  the next holder of the lock redoes the rest (every journal operation can be redone);
- a machine that lost power may have lost unflushed writes: in a new boot the whole
  journal is redone, since the last checkpoint;
- a checkpoint (when the journal passes :data:`CHECKPOINT_BYTES`, and after a
  redaction) flushes everything the journal's records touched and empties it, so
  recovery is bounded and the journal never keeps old content for long.

A torn last line (a crash inside the write, before its flush) was never acknowledged
and is cut off.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from .._locks import lock_exclusive
from ..errors._kinds import MEMORY_BUSY, lw_error

#: Journal size that triggers a checkpoint.
CHECKPOINT_BYTES = 1 << 20


class Cancelled(Exception):
    """The caller gave up (activity cancelled) while waiting for a store's lock."""


@cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


@contextmanager
def locked(
    state: Path, store: str, cancel: threading.Event | None, timeout: float
) -> Iterator[None]:
    """The store's exclusive lock (an open file description lock, see ``_locks``: it
    holds across worker processes and NFS clients)."""
    fd = open_lock(state)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.00005
        while True:
            try:
                lock_exclusive(fd, blocking=False)
                break
            except BlockingIOError:
                if cancel is not None and cancel.is_set():
                    raise Cancelled() from None
                if time.monotonic() > deadline:
                    raise lw_error(
                        MEMORY_BUSY,
                        f"store {store} stayed locked for {timeout:.0f}s; "
                        "another writer holds it (this is retried)",
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.001)
        yield
    finally:
        os.close(fd)


def open_lock(state: Path) -> int:
    """A new open file of the store's lock (each holds the lock on its own: see
    ``_locks``), the state folder made if absent."""
    path = f"{state}/lock"
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        state.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def try_lock(state: Path) -> int | None:
    """The store's exclusive lock if it is free now: the descriptor that holds it
    (close it to release), else ``None``."""
    fd = open_lock(state)
    try:
        lock_exclusive(fd, blocking=False)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class Journal:
    def __init__(self, state: Path) -> None:
        self.path = state / "journal.log"
        self.marker = state / "applied"

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def commit(self, record: dict[str, Any]) -> int:
        """Append ``record`` and flush it: the commit point. Returns the new end."""
        line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def _applied(self) -> tuple[str, int]:
        try:  # read on every lock: plain calls
            fd = os.open(self.marker, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return "", 0
        try:
            boot, _, offset = os.read(fd, 256).decode("ascii", "replace").partition(" ")
            return boot, int(offset)
        except ValueError:
            return "", 0
        finally:
            os.close(fd)

    def mark(self, end: int) -> None:
        fd = os.open(self.marker, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            text = f"{boot_id()} {end}".ljust(64).encode()
            os.pwrite(fd, text, 0)
        finally:
            os.close(fd)

    def pending(self) -> tuple[list[dict[str, Any]], int] | None:
        """Records to redo and the end they reach, or ``None`` if all is applied.
        Costs a stat and a small read when nothing is pending."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None
        size = info.st_size
        if size == 0:
            return None
        boot, offset = self._applied()
        same_boot = boot == boot_id()
        if same_boot and offset >= size:
            return None
        return self._read_from(offset if same_boot else 0)

    def records(self) -> list[dict[str, Any]]:
        return self._read_from(0)[0]

    def _read_from(self, start: int) -> tuple[list[dict[str, Any]], int]:
        try:
            with self.path.open("rb") as f:
                f.seek(start)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        records: list[dict[str, Any]] = []
        good = 0
        for line in data.split(b"\n")[:-1]:
            try:
                records.append(json.loads(line))
            except ValueError:
                break
            good += len(line) + 1
        if good < len(data):  # a torn last line: never flushed, never acknowledged
            os.truncate(self.path, start + good)
        return records, start + good

    def reset(self) -> None:
        """Empty the journal after a checkpoint flushed what it described. The marker
        goes to 0 first: a crash between the two then only redoes records already
        applied, whereas an old end left beside an emptied journal would read the next
        commit (written from 0, shorter than that end) as already applied."""
        self.mark(0)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
