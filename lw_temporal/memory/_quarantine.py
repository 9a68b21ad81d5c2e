"""Quarantine: listing, showing, releasing and rejecting what tainted runs hold.

Mixed into :class:`MemoryStores` (the admin API the CLI, the review page and a
definition's :class:`QuarantinePolicy` call). A release applies a run's held changes
to each store as one commit, compare-and-set against what the run saw: every held path
must still be what the store had when the run first changed it (a file's sha256, a
folder's contents, or absent); if any moved, nothing of that store is applied and the
conflicts are named. The commit's audit lines carry the run's provenance, ``tainted``,
and the releaser as ``actor``; a released version does not taint its readers (a person
vouched for it). A rejection drops the held changes. Every decision, and every
conflict, is a line of ``.lw/audit/quarantine.jsonl``.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, cast

from pydantic import Field

from .._base import FrozenModel
from .._changes import StoreChange
from .._taint._book import now
from ._held import HeldSet, HeldStore, held_sets
from ._records import LedgerRecord, Provenance, StagedChangeResult, StagedCommitResult
from ._staged import staged_body
from ._txn import Conflict, Txn

if TYPE_CHECKING:
    from .._scope import StoreRef
    from ._hold import Hold
    from ._stores import MemoryStores
    from ._writer import StoreWriter

#: Paths a listing, a decision record or a result names at most (the rest counted).
MAX_PATHS = 100
#: Bytes of one file a diff shows at most.
_DIFF_BYTES = 256 * 1024
RELEASE_ACTIVITY = "lw.quarantine.release"


class HeldFile(FrozenModel):
    """One path a tainted run holds: what it would do to the store."""

    path: str
    change: Literal["write", "delete", "mkdir"]
    bytes: int = 0
    #: How many times the run changed it while held.
    changes: int = 1
    first: str
    last: str
    #: The store changed at this path since the run saw it: a release would conflict.
    moved: bool = False


class HeldRun(FrozenModel):
    """A run's held changes to one store."""

    workflow_id: str
    store: str
    taint: str
    created: str
    updated: str
    files: tuple[HeldFile, ...] = ()
    count: int = 0
    bytes: int = 0


class StoreOutcome(FrozenModel):
    """What a decision did to one store."""

    store: str
    applied: bool
    paths: tuple[str, ...] = ()
    count: int = 0
    conflicts: tuple[str, ...] = ()


class QuarantineOutcome(FrozenModel):
    """A release or rejection of one run's held changes."""

    workflow_id: str
    decision: Literal["release", "reject"]
    by: str
    why: str = ""
    stores: tuple[StoreOutcome, ...] = ()

    @property
    def applied(self) -> bool:
        return bool(self.stores) and all(s.applied for s in self.stores)


class QuarantineReview(FrozenModel):
    """What a :class:`QuarantinePolicy` is shown of one run's held changes to a store:
    the run's taint and, per path, the store's text and the held text (``None``:
    absent; files over 256 KiB or not UTF-8 are shown as ``None`` too)."""

    workflow_id: str
    store: str
    taint: str
    files: tuple[HeldFile, ...] = ()
    before: dict[str, str | None] = Field(default_factory=dict)
    after: dict[str, str | None] = Field(default_factory=dict)


class QuarantinePolicy(Protocol):
    """Decides on a tainted run's held changes as they are held (a definition names
    one in ``MemoryConfig(release_policy=...)``; the worker's
    ``MemoryOptions(quarantine_policies={name: policy})`` provides it). ``"release"``
    applies them (audited as released by ``policy:<name>``), ``"reject"`` drops them,
    ``None`` leaves them for a person. Called in a worker thread, so it may block (a
    second model's check, say); an exception leaves them for a person."""

    def decide(self, review: QuarantineReview) -> Literal["release", "reject"] | None: ...


def held_files(hs: HeldStore, held: HeldSet) -> list[HeldFile]:
    found: list[HeldFile] = []
    for rel, entry in sorted(held.entries.items()):
        change: Literal["write", "delete", "mkdir"] = (
            "write" if entry.kind == "file" else "delete" if entry.kind == "gone" else "mkdir"
        )
        if entry.kind == "dir" and not entry.opaque and hs.base(rel) is not None:
            continue  # a folder both sides have: nothing to do
        found.append(
            HeldFile(
                path=rel,
                change=change,
                bytes=entry.size,
                changes=entry.changes,
                first=entry.first,
                last=entry.last,
                moved=hs.store_view(rel).kind == "file"
                if entry.kind == "dir" and not entry.opaque
                else not hs.unmoved(rel, entry.base),
            )
        )
    return found


def summary(hs: HeldStore, held: HeldSet) -> HeldRun:
    files = held_files(hs, held)
    return HeldRun(
        workflow_id=held.workflow_id, store=held.store, taint=held.taint, created=held.created,
        updated=held.updated, files=tuple(files[:MAX_PATHS]), count=len(files), bytes=held.size,
    )  # fmt: skip


def _text(data: bytes | None) -> list[str]:
    if data is None:
        return []
    return data[:_DIFF_BYTES].decode("utf-8", "replace").splitlines(keepends=True)


def render(hs: HeldStore, held: HeldSet, label: str) -> str:
    """A unified diff per held path against the store as it is now, each headed by
    what the run does and whether the store moved since the run saw it."""
    parts: list[str] = []
    for file in held_files(hs, held):
        entry = held.entries[file.path]
        note = "; the store changed here since the run saw it (a release conflicts)"
        parts.append(
            f"# {label}/{file.path}: {file.change} by {held.workflow_id}, "
            f"{file.changes} change(s){note if file.moved else ''}\n"
        )
        if file.change == "mkdir":
            parts.append("(a new folder)\n")
            continue
        now_there = hs.store_view(file.path)
        before = now_there.content if now_there.kind == "file" else None
        after = hs.blob(entry) if entry.kind == "file" else None
        if file.change == "delete" and now_there.kind == "dir":
            parts.append("(the folder and everything in it is deleted)\n")
            continue
        diff = difflib.unified_diff(
            _text(before), _text(after),
            fromfile=f"a/{label}/{file.path}" if before is not None else "/dev/null",
            tofile=f"b/{label}/{file.path}" if after is not None else "/dev/null",
        )  # fmt: skip
        lines = [
            ln if ln.endswith("\n") else ln + "\n\\ No newline at end of file\n" for ln in diff
        ]
        parts.append("".join(lines) or "(no difference)\n")
    return "".join(parts)


def review_of(hs: HeldStore, held: HeldSet) -> QuarantineReview:
    files = held_files(hs, held)
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}
    for file in files:
        seen = hs.store_view(file.path)
        entry = held.entries[file.path]
        before[file.path] = _decoded(seen.content)
        after[file.path] = _decoded(hs.blob(entry)) if entry.kind == "file" else None
    return QuarantineReview(
        workflow_id=held.workflow_id, store=held.store, taint=held.taint, files=tuple(files),
        before=before, after=after,
    )  # fmt: skip


def _decoded(data: bytes | None) -> str | None:
    if data is None or len(data) > _DIFF_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def release_changes(hs: HeldStore, held: HeldSet) -> list[StoreChange]:
    changes: list[StoreChange] = []
    for rel, entry in held.entries.items():
        if entry.kind == "gone":
            changes.append(StoreChange(rel, "delete"))
        elif entry.kind == "dir":
            if entry.opaque:
                changes.append(StoreChange(rel, "delete"))
            changes.append(StoreChange(rel, "mkdir"))
        else:
            assert entry.blob is not None
            changes.append(StoreChange(rel, "write", hs.blob_path(entry.blob), entry.size))
    return changes


def checked_body(
    hs: HeldStore, held: HeldSet, changes: Sequence[StoreChange]
) -> Callable[[Txn], StagedCommitResult]:
    """The release's commit: every held path still as the run saw it, then the changes
    all or nothing (the store's own rules: scan, quota, paths)."""
    inner = staged_body(held.ref, changes, None)

    def body(txn: Txn) -> StagedCommitResult:
        conflicts: list[StagedChangeResult] = []
        for rel, entry in sorted(held.entries.items()):
            if txn.batch.touches(rel):
                raise Conflict(rel)  # a mutation earlier in this batch: judge it next
            if entry.kind == "dir" and not entry.opaque:
                if hs.store_view(rel).kind == "file":  # a folder is made where it is not
                    conflicts.append(_conflict(rel, "is a file in the store now"))
                continue
            if not hs.unmoved(rel, entry.base):
                now_base = hs.base(rel)
                conflicts.append(
                    StagedChangeResult(
                        path=rel,
                        kind="write",
                        status="rejected",
                        reason=f"changed in the store since the run saw it "
                        f"({_state(entry.base)} then, {_state(now_base)} now)",
                    )
                )
        if conflicts:
            return StagedCommitResult(
                store=str(held.ref), applied=False, changes=tuple(conflicts[:MAX_PATHS]),
                omitted=max(0, len(conflicts) - MAX_PATHS),
            )  # fmt: skip
        return inner(txn)

    return body


def _conflict(rel: str, reason: str) -> StagedChangeResult:
    return StagedChangeResult(path=rel, kind="mkdir", status="rejected", reason=reason)


def _state(base: str | None) -> str:
    if base is None:
        return "absent"
    if base.startswith("dir:"):
        return f"a folder ({base[4:16]})"
    return f"sha256 {base[:12]}"


def record_decision(stores_state: os.PathLike[str] | str, line: dict[str, object]) -> None:
    """Append a decision to ``.lw/audit/quarantine.jsonl`` (synced: it is the record)."""
    path = os.path.join(stores_state, "audit", "quarantine.jsonl")
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (json.dumps({"time": now(), **line}, ensure_ascii=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class StoreQuarantine:
    """The quarantine's admin methods of :class:`MemoryStores`."""

    _writer: StoreWriter

    @property
    def _stores(self) -> MemoryStores:
        return cast("MemoryStores", self)

    # -- the worker's gate (``MemoryStores.gate``) ------------------------------------
    def _route(
        self, store: StoreRef, provenance: Provenance, *rels: str
    ) -> tuple[Provenance, Hold | None]:
        """Where a mutation goes by its run's taint (see :mod:`._gate`); without a
        gate (admin tools, the CLI) every mutation goes to the store."""
        gate = self._stores.gate
        if gate is None or provenance.workflow_id is None:
            return provenance, None
        return gate.route(store, provenance, rels)

    def _held_record(self, store: StoreRef, provenance: Provenance) -> LedgerRecord | None:
        gate = self._stores.gate
        return None if gate is None else gate.recorded(store, provenance)

    def quarantined(self, workflow_id: str | None = None) -> list[HeldRun]:
        """What tainted runs hold, one entry per run and store (oldest held first);
        only ``workflow_id``'s with it."""
        found = [
            summary(hs, held)
            for hs, held in held_sets(self._stores)
            if workflow_id is None or held.workflow_id == workflow_id
        ]
        return sorted(found, key=lambda r: (r.created, r.workflow_id, r.store))

    def show_quarantined(self, workflow_id: str) -> str:
        """A unified diff of everything ``workflow_id`` holds, store by store."""
        parts = []
        for hs, held in held_sets(self._stores):
            if held.workflow_id == workflow_id:
                label = self._stores.label(held.ref)
                parts.append(f"## {label}: held by {workflow_id}, {held.taint}\n")
                parts.append(render(hs, held, label))
        return "".join(parts)

    def release_quarantined(
        self, workflow_id: str, *, by: str, why: str = "", store: str | None = None
    ) -> QuarantineOutcome:
        """Apply ``workflow_id``'s held changes (of every store, or ``store``'s), each
        store's as one compare-and-set commit audited with ``by``."""
        if not by.strip():
            raise ValueError("a release needs --by: who releases it")
        outcomes = []
        for hs, held in self._held_of(workflow_id, store):
            outcomes.append(self._release_one(hs, held, by))
        outcome = QuarantineOutcome(
            workflow_id=workflow_id, decision="release", by=by, why=why, stores=tuple(outcomes)
        )
        self._record(outcome)
        return outcome

    def reject_quarantined(
        self, workflow_id: str, *, by: str, why: str = "", store: str | None = None
    ) -> QuarantineOutcome:
        """Drop ``workflow_id``'s held changes; the stores are not touched."""
        if not by.strip():
            raise ValueError("a rejection needs --by: who rejects it")
        outcomes = []
        for hs, _held in self._held_of(workflow_id, store):
            with hs.locked():
                current = hs.load()
                if current is None or not current.entries:
                    continue
                paths = sorted(current.entries)
                hs.remove()
                hs.log("reject", ".", Provenance.admin(by), why=why)
            outcomes.append(
                StoreOutcome(
                    store=current.store,
                    applied=True,
                    paths=tuple(paths[:MAX_PATHS]),
                    count=len(paths),
                )
            )
        outcome = QuarantineOutcome(
            workflow_id=workflow_id, decision="reject", by=by, why=why, stores=tuple(outcomes)
        )
        self._record(outcome)
        return outcome

    def _held_of(self, workflow_id: str, store: str | None) -> list[tuple[HeldStore, HeldSet]]:
        return [
            (hs, held)
            for hs, held in held_sets(self._stores)
            if held.workflow_id == workflow_id and (store is None or held.store == store)
        ]

    def _release_one(self, hs: HeldStore, held: HeldSet, by: str) -> StoreOutcome:
        with hs.locked():
            current = hs.load()
            if current is None or not current.entries:
                return StoreOutcome(store=held.store, applied=True)
            provenance = Provenance(
                namespace=current.namespace, workflow_id=current.workflow_id,
                workflow_type=current.workflow_type, run_id=current.run_id, role=current.role,
                activity_type=RELEASE_ACTIVITY, actor=by, tainted=True,
            )  # fmt: skip
            changes = release_changes(hs, current)
            result = self._writer.mutate(
                current.ref, provenance, "release", checked_body(hs, current, changes),
                StagedCommitResult, None,
            )  # fmt: skip
            paths = sorted(current.entries)
            if not result.applied:
                conflicts = tuple(f"{c.path}: {c.reason}" for c in result.changes if c.reason)
                hs.log("release refused", ".", provenance, conflicts=list(conflicts[:MAX_PATHS]))
                return StoreOutcome(
                    store=current.store, applied=False, paths=tuple(paths[:MAX_PATHS]),
                    count=len(paths), conflicts=conflicts,
                )  # fmt: skip
            hs.remove()
            hs.log("release", ".", provenance)
        return StoreOutcome(
            store=current.store, applied=True, paths=tuple(paths[:MAX_PATHS]), count=len(paths)
        )

    def _record(self, outcome: QuarantineOutcome) -> None:
        if not outcome.stores:
            return
        state = self._stores.layout.state
        record_decision(state, outcome.model_dump(mode="json"))


__all__ = [
    "HeldFile",
    "HeldRun",
    "QuarantineOutcome",
    "QuarantinePolicy",
    "QuarantineReview",
    "StoreOutcome",
    "StoreQuarantine",
]
