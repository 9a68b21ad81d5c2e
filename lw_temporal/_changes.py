"""What one bash command changed in a writable memory mount, and who commits it.

One type, :class:`StoreChange`, travels the whole way: the overlay capture reads it
from the upper dir, the committer hands it to the store (``MemoryStores.commit_staged``),
and the outcome names the changes kept with it. The sandbox and the memory store both
depend on this module, not on each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from ._scope import Mount, Scope, StoreRef

if TYPE_CHECKING:
    from ._sandbox import SandboxUser

ChangeKind = Literal["write", "delete", "mkdir"]

#: Control characters, which no memory name may hold, whichever way it comes in (the
#: store's API, or a bash command's change): C0, DEL and C1 (U+0085 is a line break to
#: some readers), the line and paragraph separators (U+2028, U+2029: line breaks to
#: Python's ``splitlines`` and to JavaScript) and the bidirectional formatting
#: characters (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder
#: what a listing shows (``x\u202egpj.sh`` shows as ``xhs.jpg``). A name
#: holding one misleads every listing, audit line and review page that prints it.
CONTROL_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


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
    #: Kept in the writing run's quarantine, not the store (the run is tainted).
    held: bool = False


class CommandTaint(Protocol):
    """What ``lw.bash`` asks the memory side about taint (``memory._gate.TaintGate``):
    whether a command's view makes its run tainted, whether its writes to a mount are
    held (then its overlay starts from the run's held changes), and what its network
    use makes of the run."""

    def before_command(self, scope: Scope) -> None: ...

    def holds(self, scope: Scope, mount: Mount) -> bool: ...

    def populate(
        self, scope: Scope, mount: Mount, upper: Path, user: SandboxUser | None
    ) -> None: ...

    def network_begins(self, scope: Scope) -> None: ...

    def after_network(self, scope: Scope, hosts: Sequence[str], received: int) -> None: ...


class Committer(Protocol):
    """Commits one command's changes to one store, all or nothing; called inside the
    bash activity (or a thread that copied its context). ``since`` is the store's
    audit mark (``CommitMark``) taken before the command started: a path another
    writer changed after it refuses the command's changes rather than overwrite the
    other change with what the command derived from the earlier content."""

    def __call__(
        self,
        scope: Scope,
        store: StoreRef,
        changes: Sequence[StoreChange],
        *,
        since: int | None = None,
    ) -> CommitOutcome: ...


#: Where a store's change log ends now (``None``: no such log), for ``Committer``'s
#: ``since``.
CommitMark = Callable[[Scope, StoreRef], "int | None"]
