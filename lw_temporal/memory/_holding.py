"""Holding a tainted run's change instead of committing it: the store's rules, the run's view.

Each mutation the stores offer has its held form here, with the same checks in the
same words (compare-and-set against what the run sees, the scan, the per-file size,
paths) and the same results, marked ``held``. The quota: the held changes of one run
to one store must fit the store's quota on their own (bytes of held files, held
entries, each file's size); they do not count against the store as other runs see it
(a tainted run cannot fill a shared store for everyone), and a release is checked
against the store's quota like any commit.

A bash command's held form is different: its overlay starts from the run's held
changes (``_gate``), so what it leaves relative to the store *is* the new held state,
which replaces the old one whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._changes import StoreChange
from .._scan import SEAM_OVERLAP, Finding, scan_added
from .._taint._book import now
from ..errors._kinds import (
    INVALID_REQUEST,
    MEMORY_CONFLICT,
    MEMORY_NOT_FOUND,
    QUOTA_EXCEEDED,
    SCAN_BLOCKED,
    lw_error,
)
from . import _fs
from ._held import HeldEntry, HeldSet, HeldStore
from ._ledger import key_hash
from ._records import (
    MutationResult,
    Provenance,
    StagedChangeResult,
    StagedCommitResult,
)
from ._rules import blocked, check_precondition, file_parts, file_too_big, mib

#: The most per-path results a held bash commit lists (as a store commit does).
MAX_LISTED = 200


class Holding:
    """One change to a run's held set, made under its lock: the set as loaded, the
    changes made to it, and the checks a save must pass."""

    def __init__(self, held: HeldStore, provenance: Provenance, taint: str) -> None:
        self.store = held
        self.provenance = provenance
        self.who = provenance.who()
        loaded = held.load()
        self.held = loaded or HeldSet(
            workflow_id=held.workflow_id,
            run_id=provenance.run_id,
            workflow_type=provenance.workflow_type,
            namespace=provenance.namespace,
            role=provenance.role,
            store=str(held.store),
            kind=held.store.kind,
            key=held.store.key,
            taint=taint,
            created=now(),
            updated=now(),
        )
        self.entries = dict(self.held.entries)
        self.quota = held.stores.quota(held.store)

    # -- exactly once ---------------------------------------------------------------
    def recorded(self) -> dict[str, Any] | None:
        key = self.provenance.idempotency_key
        return None if key is None else self.held.ledger.get(key_hash(key))

    # -- the view while changing ----------------------------------------------------
    def kind(self, rel: str) -> str | None:
        return self.store.view(self._current(), rel).kind

    def content(self, rel: str) -> tuple[bytes | None, str | None]:
        seen = self.store.view(self._current(), rel)
        return (seen.content, seen.sha) if seen.kind == "file" else (None, None)

    def _current(self) -> HeldSet:
        return self.held.model_copy(update={"entries": self.entries})

    # -- changing -------------------------------------------------------------------
    def _base(self, rel: str) -> str | None:
        old = self.entries.get(rel)
        return old.base if old is not None else self.store.base(rel)

    def _entry(self, rel: str, **fields: Any) -> HeldEntry:
        old = self.entries.get(rel)
        stamp = now()
        return HeldEntry(
            base=self._base(rel),
            first=old.first if old is not None else stamp,
            last=stamp,
            changes=(old.changes + 1) if old is not None else 1,
            **fields,
        )

    def put_file(self, rel: str, content: bytes, shown: str) -> str:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            kind = self.kind(above)
            if kind == "file":
                raise lw_error(INVALID_REQUEST, f"{self.who}: {above} is a file, not a folder")
            if kind is None:
                gone = self.entries.get(above)
                self.entries[above] = self._entry(above, kind="dir", opaque=gone is not None)
        if self.kind(rel) == "dir":
            raise lw_error(INVALID_REQUEST, f"{self.who}: {shown} is a folder, not a file")
        sha = self.store.put_blob(content)
        self.entries[rel] = self._entry(rel, kind="file", size=len(content), blob=sha)
        return sha

    def remove(self, rel: str) -> list[str]:
        """Remove ``rel`` (a file, or a folder and what is below it) from the view;
        returns the files removed."""
        was_dir = self.kind(rel) == "dir"
        below = self.store.files_below(self._current(), rel) if was_dir else []
        removed = [p for p, k, _s in below if k == "file"] if was_dir else [rel]
        for path in [p for p in self.entries if p == rel or p.startswith(rel + "/")]:
            del self.entries[path]
        if self.store.store_view(rel).kind is not None and self.kind(rel) is not None:
            self.entries[rel] = self._entry(rel, kind="gone")
        return removed

    # -- checks and saving ----------------------------------------------------------
    def scan(self, rel: str, before: bytes, added: bytes, op: str, shown: str) -> list[Finding]:
        findings = scan_added(self.store.stores.scanner, rel, before, added)
        refusal = blocked(findings)
        if refusal:
            raise lw_error(SCAN_BLOCKED, f"{self.who}: {op} to {shown} refused: {refusal}")
        return findings

    def quota_problem(self, shown: str, size: int) -> str | None:
        quota = self.quota
        problem = file_too_big(quota, shown, size)
        if problem:
            return problem
        held = sum(e.size for e in self.entries.values() if e.kind == "file")
        if held > quota.max_bytes:
            return (
                f"this run's held changes to {self.store.store} would be {mib(held)}, over the "
                f"store's quota of {mib(quota.max_bytes)} (MemoryQuota.max_bytes); hold less"
            )
        if len(self.entries) > quota.max_files:
            return (
                f"this run's held changes to {self.store.store} would touch "
                f"{len(self.entries)} paths, over the store's quota of {quota.max_files} "
                "(MemoryQuota.max_files)"
            )
        return None

    def save(self, op: str, rel: str, result: dict[str, Any], **detail: Any) -> None:
        ledger = dict(self.held.ledger)
        key = self.provenance.idempotency_key
        if key is not None:
            ledger[key_hash(key)] = result
            while len(ledger) > 256:
                del ledger[next(iter(ledger))]
        held = self.held.model_copy(
            update={
                "entries": self.entries,
                "ledger": ledger,
                "updated": now(),
                "generation": self.held.generation + 1,
            }
        )
        self.store.save(held)
        self.store.log(op, rel, self.provenance, **detail)
        self.held = held


def _held_result(record: dict[str, Any]) -> MutationResult:
    return MutationResult.model_validate(record).model_copy(update={"replayed": True})


def hold_file_op(
    held: HeldStore,
    taint: str,
    path: str,
    provenance: Provenance,
    op: str,
    shown: str,
    edit: Callable[[bytes | None], bytes],
    if_sha256: str | None,
    *,
    append: bytes | None = None,
) -> MutationResult:
    """A write, append or replace of one file, held (``edit`` makes the new content
    from the run's view of the old; ``append`` names the added bytes, scanned with
    the seam before them as a store append is)."""
    parts = file_parts(path, shown, provenance)
    rel = "/".join(parts)
    with held.locked():
        h = Holding(held, provenance, taint)
        if (done := h.recorded()) is not None:
            return _held_result(done)
        kind = h.kind(rel)
        if kind not in (None, "file"):
            raise lw_error(INVALID_REQUEST, f"{h.who}: {shown} is a {kind}, not a file")
        old, before = h.content(rel)
        check_precondition(if_sha256, before, shown, h.who)
        new = edit(old)
        if append is not None and old is not None:
            findings = h.scan(rel, old[-SEAM_OVERLAP:], append, op, shown)
        else:
            findings = h.scan(rel, b"", new, op, shown)
        after = h.put_file(rel, new, shown)
        problem = h.quota_problem(shown, len(new))
        if problem:
            raise lw_error(QUOTA_EXCEEDED, f"{h.who}: {op} to {shown} refused: {problem}")
        result = MutationResult(
            path=shown, op=op, content_sha256=after, previous_sha256=before, bytes=len(new),
            findings=tuple(findings), held=True,
        )  # fmt: skip
        h.save(op, rel, result.model_dump(mode="json"), bytes=len(new), sha256_after=after)
        return result


def hold_delete(
    held: HeldStore,
    taint: str,
    path: str,
    provenance: Provenance,
    *,
    recursive: bool,
    if_sha256: str | None,
    shown: str,
) -> MutationResult:
    parts = _fs.clean_relative(path, shown)
    who = provenance.who()
    if not parts:
        raise lw_error(
            INVALID_REQUEST, f"{who}: {shown} is the store root; delete what is inside it"
        )
    rel = "/".join(parts)
    with held.locked():
        h = Holding(held, provenance, taint)
        if (done := h.recorded()) is not None:
            return _held_result(done)
        kind = h.kind(rel)
        if kind is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{who}: {shown} does not exist")
        before = None
        if kind == "dir":
            if not recursive:
                raise lw_error(
                    INVALID_REQUEST,
                    f"{who}: {shown} is a folder; pass recursive=True to delete it and "
                    "everything in it",
                )
            if if_sha256 is not None:
                raise lw_error(INVALID_REQUEST, f"{who}: if_sha256 applies to files only")
        else:
            before = h.content(rel)[1]
            check_precondition(if_sha256, before, shown, who)
        deleted = h.remove(rel)
        result = MutationResult(
            path=shown, op="delete", content_sha256=None, previous_sha256=before, bytes=0,
            deleted=tuple(deleted), held=True,
        )  # fmt: skip
        h.save("delete", rel, result.model_dump(mode="json"))
        return result


def hold_rename(
    held: HeldStore,
    taint: str,
    old: str,
    new: str,
    provenance: Provenance,
    *,
    shown: str,
    new_shown: str,
) -> MutationResult:
    who = provenance.who()
    src = "/".join(_fs.clean_relative(old, shown))
    dst = "/".join(_fs.clean_relative(new, new_shown))
    if not src or not dst:
        raise lw_error(INVALID_REQUEST, f"{who}: a rename moves a file or folder, not the root")
    if dst == src or dst.startswith(src + "/"):
        raise lw_error(INVALID_REQUEST, f"{who}: {new_shown} is {shown} itself or inside it")
    with held.locked():
        h = Holding(held, provenance, taint)
        if (done := h.recorded()) is not None:
            return _held_result(done)
        kind = h.kind(src)
        if kind is None:
            raise lw_error(MEMORY_NOT_FOUND, f"{who}: {shown} does not exist")
        if h.kind(dst) is not None:
            raise lw_error(MEMORY_CONFLICT, f"{who}: {new_shown} already exists")
        if kind == "file":
            moves = [(src, dst)]
        else:
            below = h.store.files_below(h._current(), src)
            moves = [(p, dst + p[len(src) :]) for p, k, _s in below if k == "file"]
        contents = [(to, h.content(frm)[0] or b"") for frm, to in moves]
        h.remove(src)
        sha = None
        for to, data in contents:
            sha = h.put_file(to, data, new_shown)
        if kind == "dir" and not contents:
            h.entries[dst] = h._entry(dst, kind="dir")
        result = MutationResult(
            path=shown, op="rename", content_sha256=sha if kind == "file" else None,
            previous_sha256=None, bytes=0, held=True,
        )  # fmt: skip
        h.save("rename", src, result.model_dump(mode="json"), to=dst)
        return result


def hold_staged(
    held: HeldStore,
    taint: str,
    changes: Sequence[StoreChange],
    provenance: Provenance,
    *,
    generation: int | None,
) -> StagedCommitResult:
    """A bash command's changes, relative to the store, as the run's new held state
    (its overlay started from the held state of ``generation``; ``None``: it started
    from the bare store, which is right only while nothing is held)."""
    store = str(held.store)
    with held.locked():
        h = Holding(held, provenance, taint)
        if (done := h.recorded()) is not None:
            return StagedCommitResult.model_validate(done).model_copy(update={"replayed": True})
        stale = generation != h.held.generation if generation is not None else bool(h.entries)
        if stale:
            reason = (
                "this run's held changes to the store changed while the command ran (an "
                "earlier attempt still at work?); nothing of the command was kept, run it again"
            )
            return StagedCommitResult(
                store=store, applied=False, held=True,
                changes=(StagedChangeResult(path=".", kind="write", status="rejected",
                                            reason=reason),),
            )  # fmt: skip
        old_entries = h.entries
        h.entries = {}
        results: list[StagedChangeResult] = []
        deleted: set[str] = set()
        for change in changes:
            rel = change.path
            shown = f"{store}:{rel}"
            base = StagedChangeResult(path=rel, kind=change.kind, status="applied")
            try:
                _fs.clean_relative(rel, shown)
                results.append(_stage_one(h, old_entries, change, deleted, base, shown))
            except OSError as err:
                reason = f"cannot read the new content: {err}"
                results.append(base.model_copy(update={"status": "rejected", "reason": reason}))
            except Exception as err:  # an ApplicationError of the rules
                reason = getattr(err, "message", str(err))
                results.append(base.model_copy(update={"status": "rejected", "reason": reason}))
        problem = None
        if not any(r.status == "rejected" for r in results):
            problem = h.quota_problem(store, 0)
        if problem or any(r.status == "rejected" for r in results):
            h.entries = old_entries
            rejected = [
                r if r.status == "rejected" else r.model_copy(
                    update={"status": "rolled_back"} if not problem
                    else {"status": "rejected", "reason": problem}
                )
                for r in results
            ]  # fmt: skip
            rejected.sort(key=lambda r: r.status != "rejected")
            return StagedCommitResult(
                store=store, applied=False, held=True, changes=tuple(rejected[:MAX_LISTED]),
                omitted=max(0, len(rejected) - MAX_LISTED),
            )  # fmt: skip
        changed = [r for r in results if _differs(old_entries.get(r.path), h.entries.get(r.path))]
        changed += [
            StagedChangeResult(path=rel, kind="delete", status="applied")
            for rel in sorted(set(old_entries) - set(h.entries))
        ]
        result = StagedCommitResult(
            store=store, applied=True, held=True, changes=tuple(changed[:MAX_LISTED]),
            omitted=max(0, len(changed) - MAX_LISTED),
        )  # fmt: skip
        if changed:  # a command that changed nothing leaves the held state as it was
            h.save("bash", ".", result.model_dump(mode="json"), paths=len(changed))
        return result


def _stage_one(
    h: Holding,
    old_entries: dict[str, HeldEntry],
    change: StoreChange,
    deleted: set[str],
    base: StagedChangeResult,
    shown: str,
) -> StagedChangeResult:
    rel = change.path
    old = old_entries.get(rel)
    stamp = now()

    def entry(**fields: Any) -> HeldEntry:
        return HeldEntry(
            base=old.base if old is not None else h.store.base(rel),
            first=old.first if old is not None else stamp,
            last=stamp if old is None or _changed(old, fields) else old.last,
            changes=(old.changes + (1 if _changed(old, fields) else 0)) if old else 1,
            **fields,
        )

    if change.kind == "delete":
        deleted.add(rel)
        h.entries[rel] = entry(kind="gone")
        return base
    if change.kind == "mkdir":
        h.entries[rel] = entry(kind="dir", opaque=rel in deleted)
        return base
    assert change.source is not None
    problem = file_too_big(h.quota, shown, change.size)
    if problem:
        return base.model_copy(update={"status": "rejected", "reason": problem})
    content = change.source.read_bytes()
    sha = h.store.put_blob(content)
    findings: list[Finding] = []
    if old is None or old.blob != sha:
        findings = h.scan(rel, b"", content, "write", shown)
    h.entries[rel] = entry(kind="file", size=len(content), blob=sha)
    return base.model_copy(
        update={"sha256_after": sha, "bytes": len(content), "findings": tuple(findings)}
    )


def _differs(old: HeldEntry | None, new: HeldEntry | None) -> bool:
    if old is None or new is None:
        return old is not new
    return (old.kind, old.blob, old.opaque) != (new.kind, new.blob, new.opaque)


def _changed(old: HeldEntry, fields: dict[str, Any]) -> bool:
    return any(getattr(old, name) != value for name, value in fields.items())
