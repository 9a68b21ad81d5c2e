"""Bash capture: commit what a command changed in a writable memory mount.

``lw.bash`` runs each command with writable memory mounts overlaid and, after it,
hands the overlay's changes to a committer. This one sends them through
:meth:`MemoryStores.commit_staged`, so bash-made changes get the same versions, audit
lines (with the bash activity's provenance), quota, scan and exactly-once record as
the ``lw.memory.*`` activities, and a command whose changes break a rule has all of
them rolled back.

Before the store reads a byte, the changes are held against the store's quota by
their ``lstat`` sizes and by how many files and folders they add: 200 sparse 255 MiB
files, or 50,000 new folders under a 5-file quota, are refused here at once instead
of being read (or counted) under the store's lock.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from .._changes import CommitMark, CommitOutcome, Committer, StoreChange
from .._definitions import MemoryQuota
from .._scope import Scope, StoreRef
from ._records import Provenance
from ._stores import MemoryStores

ROLLED_BACK = "rolled back with the rest of this command's memory changes"


def audit_mark(stores: MemoryStores) -> CommitMark:
    """Where a store's audit log ends now: every change applied after this has its
    audit line past it (a commit applies the files before it appends their lines)."""

    def mark(_scope: Scope, store: StoreRef) -> int | None:
        try:
            return os.stat(stores.files(store).audit.path).st_size
        except FileNotFoundError:
            return 0

    return mark


def bash_committer(stores: MemoryStores) -> Committer:
    """A ``commit_staged`` for :class:`BashActivities`; call it inside the activity
    (or a thread that copied its context) so the provenance is the bash activity's."""

    def commit(
        scope: Scope, store: StoreRef, changes: Sequence[StoreChange], *, since: int | None = None
    ) -> CommitOutcome:
        problem = _over_quota(stores, store, changes)
        if problem is not None:
            path, reason = problem
            others = f"{len(changes) - 1} other changes {ROLLED_BACK}"
            return CommitOutcome(applied=[], refused=[(path, reason), (".", others)])
        result = stores.commit_staged(store, changes, Provenance.from_activity(scope), since=since)
        if result.applied:
            # A retried command gets what its first attempt committed (the ledger's
            # record, capped), not what it staged this time; a held one what it changed
            # in the run's held state (its overlay held all of that state).
            applied = (
                [StoreChange(c.path, c.kind) for c in result.changes]
                if result.replayed or result.held
                else list(changes)
            )
            return CommitOutcome(applied=applied, refused=[], held=result.held)
        refused = [
            (c.path, c.reason if c.status == "rejected" and c.reason else ROLLED_BACK)
            for c in result.changes
        ]
        return CommitOutcome(applied=[], refused=refused)

    return commit


def _over_quota(
    stores: MemoryStores, store: StoreRef, changes: Sequence[StoreChange]
) -> tuple[str, str] | None:
    """(path, reason) of the first quota the changes break on their own, from sizes
    and names only; None when the store must judge (it knows the current usage)."""
    quota: MemoryQuota = stores.quota(store)
    writes = [c for c in changes if c.kind == "write"]
    for change in writes:
        if change.size > quota.max_file_bytes:
            return change.path, (
                f"{store}:{change.path} is {change.size} bytes, over the per-file quota of "
                f"{quota.max_file_bytes} (MemoryQuota.max_file_bytes); split the file"
            )
    root = stores.root(store)
    total = sum(max(0, c.size - _size(root / c.path)) for c in writes)  # growth, not size
    if total > quota.max_bytes:
        return ".", (
            f"the command writes {total} bytes to {store}, over its quota of "
            f"{quota.max_bytes} (MemoryQuota.max_bytes); write less at once or raise the quota"
        )
    added = sum(
        1
        for c in changes
        if c.kind == "mkdir" or (c.kind == "write" and not os.path.lexists(root / c.path))
    )
    if added > quota.max_files:
        return ".", (
            f"the command adds {added} files and folders to {store}, over its quota of "
            f"{quota.max_files} (MemoryQuota.max_files, folders count); add fewer at once "
            "or raise the quota"
        )
    return None


def _size(path: os.PathLike[str]) -> int:
    """The current file's size (0 for none, or for a link or folder in the way)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0
