"""What a killed worker leaves behind (overlay staging, Landlock's private folders),
swept by the next worker that starts, and never a live peer's.

Each worker process claims an owner name (host, pid, a random tag) by holding the lock
of ``<local state>/sandbox/owners/<owner>.lock`` for as long as it lives, and names
every staging folder ``staging/<owner>.<id>``, every private folder
``sandbox/run-<owner>.<id>``, Landlock's ``TMPDIR``
(``/dev/shm/lw-tmp-run-<owner>.<id>``) and its staging root on a tmpfs
(``/dev/shm/lw-staging-<owner>.<id>``) after it. A worker that starts tries each
owner's lock: one it can take belongs to a worker that is gone (the kernel, or the NFS server once
its lease ends, released it), so that owner's folders are removed, then its lock file.
A lock it cannot take belongs to a running worker on this host or another one sharing
the runs root, whose folders stay. The sweep runs in a thread, removes folders of any
depth without following links, and stops at a time budget (the rest is left for the
next start, and logged).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .._locks import lock_exclusive
from ._landlock import SHM
from ._overlay import SHM_STAGING_PREFIX
from ._tree import remove_tree

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one sweep did."""

    #: Owners (gone workers) whose folders were all removed.
    owners: int = 0
    #: Staging and private folders removed.
    folders: int = 0
    #: Owners still running (their folders kept).
    live: int = 0
    #: Whether the time budget ended the sweep before it was done.
    partial: bool = False


class WorkerClaim:
    """This worker's owner name and the lock that says it is alive."""

    def __init__(self, local_state: Path) -> None:
        host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:32] or "host"
        self.owner = f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        owners = local_state / "sandbox" / "owners"
        owners.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Locked before it is named: a peer's sweep that found the lock file between its
        # creation and its lock would take the lock, sweep this live worker and unlink
        # its file (workers starting together on one data dir did).
        fresh = owners / f".{self.owner}.new"
        self._fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            lock_exclusive(self._fd, blocking=False)
            os.rename(fresh, owners / f"{self.owner}.lock")
        except BaseException:
            os.close(self._fd)
            with contextlib.suppress(OSError):
                os.unlink(fresh)
            raise

    def name(self) -> str:
        """A fresh folder name of this owner."""
        return f"{self.owner}.{uuid.uuid4().hex}"

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def sweep(local_state: Path, *, keep: str | None = None, budget: float = 30.0) -> SweepReport:
    """Remove the folders of every owner whose lock nobody holds (``keep``: this
    worker's own owner, never swept)."""
    owners_dir = local_state / "sandbox" / "owners"
    deadline = time.monotonic() + budget
    owners = folders = live = 0
    try:
        locks = sorted(p for p in owners_dir.iterdir() if p.suffix == ".lock")
    except OSError:
        return SweepReport()
    for lock in locks:
        owner = lock.stem
        if owner == keep:
            continue
        if time.monotonic() > deadline:
            return _logged(SweepReport(owners, folders, live, partial=True))
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                lock_exclusive(fd, blocking=False)
            except BlockingIOError:
                live += 1
                continue
            done, removed = _remove_owned(local_state, owner, deadline)
            folders += removed
            if not done:
                return _logged(SweepReport(owners, folders, live, partial=True))
            with contextlib.suppress(OSError):
                lock.unlink()
            owners += 1
        finally:
            os.close(fd)
    return _logged(SweepReport(owners, folders, live))


def _remove_owned(local_state: Path, owner: str, deadline: float) -> tuple[bool, int]:
    removed = 0
    places = (
        (local_state / "staging", ""),
        (local_state / "sandbox", "run-"),
        (SHM, "lw-tmp-run-"),  # Landlock's TMPDIR of a command of that owner
        (SHM, SHM_STAGING_PREFIX),  # that owner's staging root on a tmpfs
    )
    for folder, prefix in places:
        try:
            entries = [e.name for e in os.scandir(folder)]
        except OSError:
            continue
        for name in entries:
            if not name.startswith(f"{prefix}{owner}."):
                continue
            if time.monotonic() > deadline:
                return False, removed
            try:
                remove_tree(folder / name)
                removed += 1
            except OSError as err:
                logger.warning("lw.bash: leftover folder %s not removed: %s", folder / name, err)
    return True, removed


def _logged(report: SweepReport) -> SweepReport:
    if report.folders or report.partial:
        logger.info(
            "lw.bash: removed %d staging/private folders of %d workers that are gone "
            "(%d running workers' kept)%s",
            report.folders,
            report.owners,
            report.live,
            "; stopped at the time budget, the rest goes at the next start"
            if report.partial
            else "",
        )
    return report
