"""Bash capture: commit what a command changed in a writable memory mount.

``lw.bash`` runs each command with writable memory mounts overlaid and, after it,
hands the overlay's changes to a committer. This one sends them through
:meth:`MemoryStores.commit_staged`, so bash-made changes get the same versions, audit
lines (with the bash activity's provenance), quota, scan and exactly-once record as
the ``lw.memory.*`` activities, and a command whose changes break a rule has all of
them rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._bash import CommitOutcome, CommitStaged
from .._sandbox import UpperChange
from .._scope import Scope, StoreRef
from ._models import Provenance, StagedChange
from ._stores import MemoryStores

ROLLED_BACK = "rolled back with the rest of this command's memory changes"


def bash_committer(stores: MemoryStores) -> CommitStaged:
    """A ``commit_staged`` for :class:`BashActivities`; call it inside the activity
    (or a thread that copied its context) so the provenance is the bash activity's."""

    def commit(scope: Scope, store: StoreRef, changes: Sequence[UpperChange]) -> CommitOutcome:
        staged = [StagedChange(c.path, c.kind, c.source) for c in changes]
        result = stores.commit_staged(store, staged, Provenance.from_activity(scope))
        if result.applied:
            # From the result, not the request: a retried command gets what its first
            # attempt committed (the ledger's record), not what it staged this time.
            applied = [UpperChange(c.path, c.kind) for c in result.changes]
            return CommitOutcome(applied=applied, refused=[])
        refused = [
            (c.path, c.reason if c.status == "rejected" and c.reason else ROLLED_BACK)
            for c in result.changes
        ]
        return CommitOutcome(applied=[], refused=refused)

    return commit
