"""What one bash command changed in a writable memory mount, and who commits it.

One type, :class:`StoreChange`, travels the whole way: the overlay capture reads it
from the upper dir, the committer hands it to the store (``MemoryStores.commit_staged``),
and the outcome names the changes kept with it. The sandbox and the memory store both
depend on this module, not on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from ._scope import Scope, StoreRef

ChangeKind = Literal["write", "delete", "mkdir"]


@dataclass(frozen=True, slots=True)
class StoreChange:
    """One change: ``path`` is relative POSIX inside the store; ``source`` holds the
    new content of a ``write`` and ``size`` its ``lstat`` size (known before a byte
    of it is read)."""

    path: str
    kind: ChangeKind
    source: Path | None = None
    size: int = 0


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """What a committer kept: every change (``applied``), or nothing, with
    ``refused`` saying why, per path."""

    applied: Sequence[StoreChange]
    refused: Sequence[tuple[str, str]]


class Committer(Protocol):
    """Commits one command's changes to one store, all or nothing; called inside the
    bash activity (or a thread that copied its context)."""

    def __call__(
        self, scope: Scope, store: StoreRef, changes: Sequence[StoreChange]
    ) -> CommitOutcome: ...
