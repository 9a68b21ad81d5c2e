"""The taint gate: where a run's memory writes go, and what its reads make of it.

Installed on the worker's :class:`MemoryStores` (``stores.gate``), so that every way an
agent changes memory (the ``lw.memory.*`` activities, Claude's native tools, bash
commits) passes it, and asked by the activities' reads. For each mutation it looks
up the writing run in the worker's taint book (the run named by the activity's own
``activity.info()``, never a flag of its input):

- untainted: the mutation goes to the store as before (the whole cost is a ``stat``);
- tainted, to a store quarantined for it (the orchestrator's pipeline store always, a
  planner's workflow and org stores unless its definition's ``memory.quarantine``
  leaves them out): the change is held (:mod:`._holding`) and the run alone sees it;
- tainted, to any other store: it commits, its provenance says ``tainted``, and its
  paths are marked (:class:`TaintMarks`), so a run that reads them is tainted too;
- approved (the provenance names an ``actor``: a dream's promotion, a release): it
  commits, still saying ``tainted`` if the run was, since a person decided.

Reads taint the reader when they return untrusted input: a path under an untrusted
attach or prefix of its definition, or a marked file. A bash command is judged by its
view before it starts and again when it ends (``before_command``).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from .._ids import InvalidWorkflowId, Role, parse_workflow_id
from .._sandbox import SandboxUser
from .._scope import Mount, Scope, StoreKind, StoreRef
from .._taint import TaintBook, TaintMarks, TaintRecord, untrusted_in_view, untrusted_paths
from ._held import HeldStore
from ._hold import Hold
from ._ledger import key_hash
from ._quarantine import QuarantinePolicy, review_of
from ._records import LedgerRecord, Provenance
from ._stores import MemoryStores
from ._worker import WorkerConfig

_log = logging.getLogger(__name__)
#: Overlayfs (mounted with ``userxattr``) reads a folder made over a lower one from this.
_OPAQUE = "user.overlay.opaque"


class TaintGate:
    """The taint rules of one worker's stores (see the module docstring)."""

    def __init__(
        self,
        config: WorkerConfig,
        stores: MemoryStores,
        policies: Mapping[str, QuarantinePolicy] | None = None,
    ) -> None:
        self.config = config
        self.stores = stores
        self.book = TaintBook(config.layout)
        self.marks = TaintMarks(config.layout)
        self.policies = dict(policies or {})
        #: The held generation each running command's overlay started from, by
        #: (workflow, activity, attempt, store).
        self._views: dict[tuple[str, str, int, StoreRef], int] = {}

    # -- which runs, which stores ---------------------------------------------------
    def tainted(self, workflow_id: str | None) -> TaintRecord | None:
        return None if workflow_id is None else self.book.status(workflow_id)

    def quarantined(self, workflow_id: str, store: StoreRef) -> bool:
        """Whether a tainted ``workflow_id``'s writes to ``store`` are held."""
        if store.kind is StoreKind.PIPELINE:
            return True
        if store.kind is StoreKind.DREAMING:
            return False  # a dream's own notes reach memory only by a person's approval
        try:
            definition_id = parse_workflow_id(workflow_id).definition_id
        except InvalidWorkflowId:
            return True
        definitions = self.config.definitions
        if definition_id is None or definition_id not in definitions:
            return True
        return store.kind.value in definitions[definition_id].memory.quarantine

    # -- writes ---------------------------------------------------------------------
    def route(
        self, store: StoreRef, provenance: Provenance, rels: Iterable[str] = ()
    ) -> tuple[Provenance, Hold | None]:
        """``(provenance, hold)`` for a mutation of ``rels``: the provenance to commit
        with (``tainted`` set for a tainted run) and, when the change must be held
        instead, where it goes."""
        record = self.tainted(provenance.workflow_id)
        if record is None:
            return provenance, None
        assert provenance.workflow_id is not None
        marked = provenance.model_copy(update={"tainted": True})
        if provenance.actor is not None:
            return marked, None
        if self.quarantined(provenance.workflow_id, store):
            held = HeldStore(self.stores, provenance.workflow_id, store)
            return marked, Hold(held, record.line(), self)
        self.marks.add(store, rels, provenance.workflow_id)
        return marked, None

    def recorded(self, store: StoreRef, provenance: Provenance) -> LedgerRecord | None:
        """What an earlier attempt of this activity held, if it did (a retry of a held
        change returns it, as a retried commit returns the ledger's record)."""
        key = provenance.idempotency_key
        if key is None or self.tainted(provenance.workflow_id) is None:
            return None
        assert provenance.workflow_id is not None
        current = HeldStore(self.stores, provenance.workflow_id, store).load()
        found = None if current is None else current.ledger.get(key_hash(key))
        return None if found is None else LedgerRecord(op="held", result=found)

    def moved(self, store: StoreRef, old: str, new: str, provenance: Provenance) -> None:
        """A rename carries the marks of what it moves (whoever moves it)."""
        below = self.marks.below(store, old)
        if below and provenance.workflow_id is not None:
            self.marks.add(store, [new + p[len(old) :] for p in below], provenance.workflow_id)

    def view_generation(self, provenance: Provenance, store: StoreRef) -> int | None:
        key = _key(provenance, store)
        return None if key is None else self._views.pop(key, None)

    def after_hold(self, held: HeldStore) -> None:
        """Ask the definition's release policy, if it names one, about what is held."""
        try:
            definition_id = parse_workflow_id(held.workflow_id).definition_id
        except InvalidWorkflowId:
            return
        definitions = self.config.definitions
        if definition_id is None or definition_id not in definitions:
            return
        name = definitions[definition_id].memory.release_policy
        policy = self.policies.get(name) if name else None
        if policy is None or name is None:
            return
        current = held.load()
        if current is None or not current.entries:
            return
        try:
            verdict = policy.decide(review_of(held, current))
        except Exception as err:  # a policy's failure leaves the decision to a person
            _log.warning("quarantine policy %s failed on %s: %s", name, held.workflow_id, err)
            return
        by = f"policy:{name}"
        if verdict == "release":
            self.stores.release_quarantined(held.workflow_id, by=by, store=current.store)
        elif verdict == "reject":
            self.stores.reject_quarantined(held.workflow_id, by=by, store=current.store)

    # -- reads ----------------------------------------------------------------------
    def held_for(self, scope: Scope, store: StoreRef) -> HeldStore | None:
        """The run's held changes to ``store``, when it has any (what its reads see)."""
        if self.tainted(scope.workflow_id) is None:
            return None
        held = HeldStore(self.stores, scope.workflow_id, store)
        return held if held.exists() else None

    def saw(self, scope: Scope, mount: Mount, rels: Iterable[str]) -> None:
        """The run read ``rels`` of ``mount`` (contents, or names in a listing): taint
        it if one is untrusted input."""
        if mount.store is None:
            return
        rels = list(rels)
        prefixes = untrusted_paths(scope, self.config.definitions)
        for rel in rels if prefixes else ():
            virtual = mount.virtual / rel if rel else mount.virtual
            prefix = next((p for p in prefixes if p == virtual or p in virtual.parents), None)
            if prefix is not None:
                self.book.taint(
                    scope.workflow_id, "untrusted-input",
                    f"read {virtual}, under {prefix} (untrusted input by {_whose(scope)})",
                )  # fmt: skip
                break
        hit = self.marks.hit(mount.store, rels)
        if hit is not None:
            rel, by = hit
            self.book.taint(
                scope.workflow_id, "tainted-memory",
                f"read {mount.virtual / rel}, written by tainted run {by}",
                read=f"{mount.store}:{rel}",
            )  # fmt: skip

    def before_command(self, scope: Scope) -> None:
        """A command may read anything its view shows: taint the run if the view holds
        untrusted input or files tainted runs wrote."""
        prefix = untrusted_in_view(scope, self.config.definitions)
        if prefix is not None:
            self.book.taint(
                scope.workflow_id, "untrusted-input",
                f"ran a command whose view holds {prefix} (untrusted input by "
                f"{_whose(scope)})",
            )  # fmt: skip
        for mount in scope.mounts:
            if mount.store is None:
                continue
            rel = self.marks.live(mount.store, mount.real)
            if rel is not None:
                self.book.taint(
                    scope.workflow_id, "tainted-memory",
                    f"ran a command whose view holds {mount.virtual / rel}, written by a "
                    "tainted run",
                    read=f"{mount.store}:{rel}",
                )  # fmt: skip

    def network_begins(self, scope: Scope) -> None:
        """A command that may get network responses starts: should its worker stop
        before :meth:`after_network`, the run counts tainted (see ``TaintBook``)."""
        self.book.network_begins(scope.workflow_id)

    def after_network(self, scope: Scope, hosts: Sequence[str], received: int) -> None:
        """A command read ``received`` bytes of network responses (through the egress
        proxy): whatever it then writes comes from content nobody vetted."""
        if received <= 0:
            self.book.network_settled(scope.workflow_id)
            return
        named = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
        self.book.taint(
            scope.workflow_id, "network",
            f"a command read {received} bytes of network responses through the egress "
            f"proxy ({named or 'hosts not named'})",
        )  # fmt: skip
        self.book.network_settled(scope.workflow_id)

    def holds(self, scope: Scope, mount: Mount) -> bool:
        """Whether a command's writes to ``mount`` are held: its overlay then starts
        from the run's held changes (:meth:`populate`)."""
        return (
            mount.store is not None
            and self.tainted(scope.workflow_id) is not None
            and self.quarantined(scope.workflow_id, mount.store)
        )

    def populate(self, scope: Scope, mount: Mount, upper: Path, user: SandboxUser | None) -> None:
        """Lay the run's held changes to ``mount``'s store into a fresh overlay upper
        folder (files, whiteouts for what it deleted, opaque folders), owned by the
        sandbox user, and remember which held generation the command starts from."""
        assert mount.store is not None
        from temporalio import activity

        held = HeldStore(self.stores, scope.workflow_id, mount.store)
        with held.locked():
            current = held.load()
            generation = 0 if current is None else current.generation
            for rel, entry in sorted((current.entries if current else {}).items()):
                target = PurePosixPath(os.fspath(upper)) / rel
                _parents(target, PurePosixPath(os.fspath(upper)), user)
                if entry.kind == "file":
                    shutil.copyfile(held.blob_path(entry.blob or ""), target)
                    os.chmod(target, 0o644)
                    _own(target, user)
                elif entry.kind == "dir":
                    os.makedirs(target, exist_ok=True)
                    if entry.opaque:
                        os.setxattr(target, _OPAQUE, b"y")
                    _own(target, user)
                else:
                    os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(0, 0))
        info = activity.info()
        provenance = Provenance(
            workflow_id=info.workflow_id, activity_id=info.activity_id, attempt=info.attempt
        )
        key = _key(provenance, mount.store)
        if key is not None:
            if len(self._views) > 4096:
                self._views.clear()
            self._views[key] = generation


def _whose(scope: Scope) -> str:
    if scope.definition is not None:
        return "its definition"
    if scope.role is Role.DREAMING:
        return "the definition it consolidates"
    return "a definition it composes"


def _key(provenance: Provenance, store: StoreRef) -> tuple[str, str, int, StoreRef] | None:
    if provenance.workflow_id is None or provenance.activity_id is None:
        return None
    return (provenance.workflow_id, provenance.activity_id, provenance.attempt or 0, store)


def _parents(target: PurePosixPath, upper: PurePosixPath, user: SandboxUser | None) -> None:
    folder = upper
    for part in target.relative_to(upper).parts[:-1]:
        folder = folder / part
        if not os.path.isdir(folder):
            os.mkdir(folder, 0o755)
            _own(folder, user)


def _own(path: os.PathLike[str] | str, user: SandboxUser | None) -> None:
    if user is not None:
        os.chown(path, user.uid, user.gid, follow_symlinks=False)
