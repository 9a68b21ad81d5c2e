"""Which host identity a command of one scope runs as.

Data flows one way: the scope (from the workflow ID) names the agent and the folders
it mounts; each is a key of the worker's :class:`IdentityPool` (the agent's run, the
runs whose scratch it reads, the stores it mounts), and the command's
:class:`SandboxUser` is the agent's number as uid and gid plus the shared group and
the numbers of the others as groups. The spec carries that user to whichever backend
runs the command (bwrap's identity, Landlock's switch, the passwd entry the system
view shows). Every command renews those leases past its timeout; a worker that is not
root has no pool, and its commands run as itself.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ._ids import DREAMING_DEFINITION_ID, DataLayout
from ._sandbox import SandboxUser, secure_data_dir
from ._sandbox._idrange import default_ids, unmapped
from ._sandbox._lease_folders import ensure_folder
from ._sandbox._leases import IdentityPool
from ._scope import Scope

#: The bookkeeping folders an agent passes through (to its sandbox's own folders);
#: every other one is the worker's alone.
_PASSED = ("sandbox", "staging")
#: Bookkeeping folders made now rather than on first use, so none is ever open.
#: The bookkeeping folders a root worker makes closed before any run (one made later by
#: a plain ``mkdir`` would be open to listing, as ``owners/`` once was; ``taint/``
#: makes itself closed, and exists only once a run read untrusted input).
_BOOKKEEPING = (
    "stores", "conversations", "dreaming", "manifests", "trees", "runs", "locks",
    "owners", "sandbox",
)  # fmt: skip

#: (key, folder, kind) of one lease a command needs.
_Key = tuple[str, Path, str]


def _keys(scope: Scope) -> tuple[_Key, list[_Key]]:
    own: _Key = (f"run:{scope.workflow_id}", scope.own_scratch, "run")
    others: list[_Key] = []
    for mount in scope.mounts:
        if mount.store is not None:
            others.append((f"store:{mount.store}", mount.real, "store"))
        elif mount.owner is not None and mount.owner != scope.workflow_id:
            others.append((f"run:{mount.owner}", mount.real, "run"))
    return own, others


@dataclass(frozen=True, slots=True)
class _Known:
    """A scope's identity while the leases it holds last (until ``ends``)."""

    user: SandboxUser
    #: (folder, uid, gid) each command checks: the stores and scratch it reads.
    owners: tuple[tuple[Path, int, int], ...]
    ends: float


#: Scopes whose identity a worker remembers.
_KNOWN_MAX = 4096


class CommandIdentities:
    """The per-agent identities of one worker's commands (see the module)."""

    def __init__(self, layout: DataLayout, ids: range | None = None) -> None:
        self.runs = layout.runs
        self.pool: IdentityPool | None = None
        #: Why the ids cannot be used here (then every command is refused), if so.
        self.problem: str | None = None
        if os.geteuid() == 0:
            ids = ids or default_ids()
            self.problem = unmapped(ids)
            self.pool = IdentityPool(layout.local_state, ids, shared_state=layout.state)
        self._known: dict[str, _Known] = {}

    @property
    def shared_gid(self) -> int | None:
        """The group every agent holds (``None`` for a non-root worker)."""
        return None if self.pool is None else self.pool.shared

    def check(self) -> str | None:
        """Why this worker's ids may not be leased here (the data dir's tables were
        made for another range), else ``None``."""
        return None if self.pool is None else self.pool.check()

    def needs_io(self, scope: Scope, timeout: float) -> bool:
        """Whether :meth:`user` must touch the lease table (run it in a thread)."""
        if self.pool is None:
            return False
        known = self._known.get(scope.workflow_id)
        return known is None or known.ends < time.time() + timeout + self.pool.grace / 2

    def user(self, scope: Scope, timeout: float) -> SandboxUser | None:
        """The identity of a command of ``scope`` that may run ``timeout`` seconds,
        every lease it uses renewed; raises ``LeaseRefused``."""
        pool = self.pool
        if pool is None:
            return None
        until = time.time() + timeout
        known = self._known.get(scope.workflow_id)
        if known is None or known.ends < until + pool.grace / 2:
            known = self._known[scope.workflow_id] = self._lease(pool, scope, until)
            if len(self._known) > _KNOWN_MAX:
                del self._known[next(iter(self._known))]
        for folder, uid, gid in known.owners:  # a store made since, say: one lstat each
            ensure_folder(folder, uid, gid)
        return known.user

    def _lease(self, pool: IdentityPool, scope: Scope, until: float) -> _Known:
        own, others = _keys(scope)
        numbers: list[int] = []
        owners: list[tuple[Path, int, int]] = []
        for key, folder, kind in (own, *others):
            number = pool.cached(key, kind, until)
            if number is None:
                number = pool.lease(key, folder, kind, until)
                if kind == "run":
                    self._passable(folder)
            numbers.append(number)
            if kind == "store":
                owners.append((folder, 0, number))
            elif key != own[0]:
                owners.append((folder, number, number))
        mine = numbers[0]
        user = SandboxUser(mine, mine, (pool.shared, *numbers[1:]))
        # Valid while every lease it holds is: the soonest to end decides.
        ends = min(pool.held_until(key, kind) for key, _, kind in (own, *others))
        return _Known(user, tuple(owners), ends)

    def _passable(self, scratch: Path) -> None:
        """The run folders above a scratch (``runs/<id>/``, ``sub-runs/``...) may be
        passed but not listed or watched by agents (mode 0711)."""
        folder = scratch.parent
        while folder != self.runs and self.runs in folder.parents:
            try:
                info = os.lstat(folder)
                if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o7777 != 0o711:
                    os.chmod(folder, 0o711)
            except FileNotFoundError:
                pass
            folder = folder.parent


def secure_layout(layout: DataLayout, shared: int | None) -> str | None:
    """Close the data dir (both roots, when apart) to other host users and its folders
    to agents that do not own them (see :mod:`._sandbox._identity`); says why not."""
    memory = (layout.memory, layout.memory / "workflows", layout.memory / "pipelines")
    if layout.runs_root is None:
        inner = (layout.runs, *memory, layout.state)
        problem = secure_data_dir(layout.root, shared, inner)
    else:
        problem = secure_data_dir(layout.root, shared, (*memory, layout.state))
        problem = problem or secure_data_dir(
            layout.runs_root, shared, (layout.runs, layout.local_state)
        )
    if shared is None or problem is not None:
        return problem
    try:
        close_data_dir(layout)
    except OSError as err:
        return f"cannot close the data dir {layout.root}: {err}"
    return None


def close_data_dir(layout: DataLayout) -> None:
    """What a root worker's agents must not reach by file permissions alone: the
    bookkeeping (``.lw/``: passable to the sandbox folders, every other folder the
    worker's own) and the store roots (open only to the groups of agents that mount
    them; a store made before is closed here, one made later is made closed)."""
    for state in dict.fromkeys((layout.state, layout.local_state)):
        for name in _BOOKKEEPING:
            (state / name).mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(state):
            if entry.is_dir(follow_symlinks=False):
                _limit(Path(entry.path), 0o711 if entry.name in _PASSED else 0o700)
            elif entry.is_file(follow_symlinks=False):
                _limit(Path(entry.path), 0o600)  # .lw/ is passable: its files are not
    memory = layout.memory
    stores = [memory / "org"]
    for kind in ("workflows", "pipelines"):
        try:
            stores += [Path(e.path) for e in os.scandir(memory / kind) if e.is_dir()]
        except FileNotFoundError:
            continue
    dreaming = memory / "workflows" / DREAMING_DEFINITION_ID
    if dreaming in stores:
        stores.remove(dreaming)
        _limit(dreaming, 0o711)
        stores += [Path(e.path) for e in os.scandir(dreaming) if e.is_dir()]
    for store in stores:
        try:
            mode = os.lstat(store).st_mode & 0o7777
        except FileNotFoundError:
            continue
        if mode & 0o007:
            os.chmod(store, mode & ~0o007)


def _limit(folder: Path, mode: int) -> None:
    if os.lstat(folder).st_mode & 0o7777 != mode:
        os.chmod(folder, mode)
