"""Planning one mutation: what it would change, checked before anything is written.

A :class:`Txn` reads the store through the changes already planned (its own, then
those of earlier mutations in the same batch, then the disk and the current-version
index) and stages journal operations, audit lines and the usage they lead to. Nothing
touches the disk until the batch commits (:mod:`._apply`).

A mutation that needs more than the index knows about a file an earlier mutation of
the batch changed (its whole content, or a folder walk below it) raises
:class:`Conflict` and runs in the next batch instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from .._definitions import MemoryQuota
from .._scan import SEAM_OVERLAP, Finding, Scanner, scan_added
from .._scope import StoreRef
from . import _fs
from ._index import FileIndex, FileState, Usage, state_of, tree_term
from ._journal import Journal
from ._ledger import AuditLog, Ledger
from ._records import AuditEntry, Provenance
from ._rules import blocked, quota_problem
from ._searchdb import SearchIndex
from ._versions import Splice, VersionStore, b64, live_ref, prefix_ref, ref_bytes, splice_ref

#: A rewrite whose changed region is at most this share of the file is kept as the old
#: bytes of that region; a larger one keeps the old file whole (hard-linked).
_SPLICE_SHARE = 0.5
#: What one audit record adds to a store's bookkeeping, about (its line in the audit
#: log and in the journal, and its part of the ledger), besides twice its path.
_RECORD_BYTES = 1024


#: The last bytes of contents this process planned or read, by sha256 (a content's
#: tail never changes, so nothing here goes stale): an append's seam scan reads none.
_TAILS: dict[str, bytes] = {}


def _keep_tail(sha: str, tail: bytes) -> None:
    if len(_TAILS) >= 1024:
        _TAILS.clear()
    _TAILS[sha] = tail


class Conflict(Exception):
    """The mutation depends on a file changed earlier in this batch: run it next."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class StoreFiles:
    """Where one store's files and bookkeeping are (each part made once: they hold
    paths only, and every mutation asks for most of them)."""

    store: StoreRef
    root: Path
    state: Path

    @cached_property
    def journal(self) -> Journal:
        return Journal(self.state)

    @cached_property
    def index(self) -> FileIndex:
        return FileIndex(self.state)

    @cached_property
    def search(self) -> SearchIndex:
        return SearchIndex(self.state)

    @cached_property
    def versions(self) -> VersionStore:
        return VersionStore(self.state)

    @cached_property
    def audit(self) -> AuditLog:
        return AuditLog(self.state)

    @cached_property
    def ledger(self) -> Ledger:
        return Ledger(self.state)

    @property
    def bookkeeping(self) -> tuple[Path, ...]:
        """The store's own records whose bytes its quota counts besides its files and
        versions (one list: a new kind of record, a search index say, joins it here)."""
        return (self.journal.path, self.audit.path, self.ledger.path)

    def bookkeeping_bytes(self) -> int:
        total = 0
        for path in self.bookkeeping:
            with suppress(FileNotFoundError):
                total += os.stat(path).st_size
        return total


@dataclass(slots=True)
class Known:
    """A file as planned changes left it: its state (``None``: deleted), the end of
    its content (for the seam scan) and, when known, all of it."""

    state: FileState | None
    tail: bytes = b""
    content: bytes | None = None


@dataclass
class Batch:
    """The mutations committed together under one lock and one journal flush."""

    files: StoreFiles
    root_fd: int | None
    usage: Usage
    view: dict[str, Known] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    made: set[str] = field(default_factory=set)
    commits: list[dict[str, Any]] = field(default_factory=list)
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What planning learnt of new versions, by sha256 (not by path: a mutation of the
    #: batch that is refused after staging, or a later one of the same file, must not
    #: change what an earlier one applies).
    states: dict[str, FileState] = field(default_factory=dict)
    contents: dict[str, bytes] = field(default_factory=dict)
    #: The store's tree id when the batch began (the search index follows a batch
    #: only from the tree it was in step with).
    start_tree: str = ""

    def touches(self, rel: str) -> bool:
        """Whether an earlier mutation changed ``rel``, a folder above or below it."""
        prefix = rel + "/"
        return (
            rel in self.view
            or any(rel == d or rel.startswith(d + "/") for d in self.gone | self.made)
            or any(p.startswith(prefix) for p in self.view)
        )


@dataclass
class Txn:
    batch: Batch
    provenance: Provenance
    quota: MemoryQuota
    scanner: Scanner
    op_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ops: list[dict[str, Any]] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    view: dict[str, Known] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    made: set[str] = field(default_factory=set)
    usage: Usage = field(init=False)

    def __post_init__(self) -> None:
        self.usage = self.batch.usage.copy()

    @property
    def store(self) -> StoreRef:
        return self.batch.files.store

    # -- reading the planned state ------------------------------------------------
    def _hidden(self, parts: tuple[str, ...]) -> bool:
        """Whether what the disk has at ``parts`` is gone once this mutation applies: it
        or a folder above is deleted, or a folder above is made by it (so is new)."""
        return any("/".join(parts[:i]) in self.gone for i in range(1, len(parts) + 1)) or any(
            "/".join(parts[:i]) in self.made for i in range(1, len(parts))
        )

    @contextmanager
    def _parent(self, parts: tuple[str, ...], shown: str) -> Iterator[int | None]:
        if self.batch.root_fd is None:
            yield None
            return
        with _fs.opened_dir(self.batch.root_fd, parts[:-1], create=False, shown=shown) as fd:
            yield fd

    def _known(self, rel: str, parts: tuple[str, ...]) -> Known | None:
        if rel in self.view:
            return self.view[rel]
        if self._hidden(parts):
            return Known(None)
        if rel in self.batch.view:
            return self.batch.view[rel]
        return None

    def state(
        self, parts: tuple[str, ...], shown: str, *, resumable: bool = False
    ) -> tuple[FileState | None, bytes | None]:
        """The file's current version (and its content if reading it was needed)."""
        rel = "/".join(parts)
        known = self._known(rel, parts)
        if known is not None:
            if known.state is not None and resumable and known.state.hstate is None:
                if known.content is None:
                    raise Conflict(rel)
                return state_of(known.content, resumable=True), known.content
            return known.state, known.content
        if self.batch.touches(rel):
            raise Conflict(rel)
        with self._parent(parts, shown) as fd:
            if fd is None:
                return None, None
            return self.batch.files.index.lookup(fd, parts[-1], rel, shown, resumable=resumable)

    def content(self, parts: tuple[str, ...], shown: str) -> bytes | None:
        rel = "/".join(parts)
        known = self._known(rel, parts)
        if known is not None:
            if known.state is not None and known.content is None:
                raise Conflict(rel)
            return known.content
        if self.batch.touches(rel):
            raise Conflict(rel)
        with self._parent(parts, shown) as fd:
            return None if fd is None else _fs.read_at(fd, parts[-1], shown)

    def kind(self, parts: tuple[str, ...], shown: str) -> str | None:
        rel = "/".join(parts)
        if rel in self.made or rel in self.batch.made:
            return "dir"
        known = self._known(rel, parts)
        if known is not None:
            return None if known.state is None else "file"
        if self.batch.touches(rel):
            raise Conflict(rel)
        with self._parent(parts, shown) as fd:
            return None if fd is None else _fs.kind_at(fd, parts[-1])

    def tail(self, parts: tuple[str, ...], shown: str, state: FileState) -> bytes:
        """The last bytes of the file (what a seam scan needs), read at its end."""
        known = self._known("/".join(parts), parts)
        if known is not None:
            return known.tail
        cached = _TAILS.get(state.sha)
        if cached is not None:
            return cached
        with self._parent(parts, shown) as fd:
            if fd is None:
                return b""
            file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                start = max(0, state.size - SEAM_OVERLAP)
                tail = os.pread(file, state.size - start, start)
            finally:
                os.close(file)
        if len(tail) == min(state.size, SEAM_OVERLAP):
            _keep_tail(state.sha, tail)
        return tail

    # -- rules ----------------------------------------------------------------------
    def scan(self, rel: str, before: bytes, added: bytes) -> tuple[list[Finding], str | None]:
        findings = scan_added(self.scanner, rel, before, added)
        return findings, blocked(findings)

    def quota_problem(self) -> str | None:
        return quota_problem(self.quota, str(self.store), self.batch.usage, self.usage)

    # -- staging --------------------------------------------------------------------
    def record(
        self,
        op: str,
        rel: str,
        size: int,
        before: str | None,
        after: str | None,
        detail: dict[str, str] | None = None,
    ) -> None:
        # Its audit line, its copy in the journal, and its share of the ledger record.
        self.usage.bookkeeping += _RECORD_BYTES + 2 * len(rel.encode("utf-8", "surrogateescape"))
        self.audit.append(
            AuditEntry.model_construct(  # every field typed by its maker
                time=now(),
                op_id=self.op_id,
                op=op,
                store=str(self.store),
                path=rel,
                bytes=size,
                sha256_before=before,
                sha256_after=after,
                detail=detail,
                **dict(self.provenance),
            )
        )

    def _set(self, rel: str, before: FileState | None, known: Known) -> None:
        after = known.state
        if before is not None:
            self.usage.live -= before.size
            self.usage.files -= 1
            self.usage.tree -= tree_term(rel, before.sha)
        if after is not None:
            self.usage.live += after.size
            self.usage.files += 1
            self.usage.tree += tree_term(rel, after.sha)
        self.view[rel] = known
        self.gone.discard(rel)

    def stage_append(
        self, parts: tuple[str, ...], data: bytes, op: str, shown: str
    ) -> tuple[FileState | None, FileState, list[Finding], str | None]:
        """Plan an append: the new state comes from the index's saved hash state and
        the new bytes; only the new bytes (and the seam before them) are scanned."""
        rel = "/".join(parts)
        before, content = self.state(parts, shown, resumable=True)
        if before is None:
            return (None, *self.stage_write(parts, data, op, shown, before=None))
        tail = content[-SEAM_OVERLAP:] if content is not None else self.tail(parts, shown, before)
        findings, refusal = self.scan(rel, tail, data)
        after = before.extended(data)
        self.usage.versions += ref_bytes(before.sha, prefix_ref(after.sha, before.size))
        seam = (tail + data)[-SEAM_OVERLAP:]
        _keep_tail(after.sha, seam)
        self._set(rel, before, Known(after, seam))
        self.ops.append(
            {"k": "a", "p": rel, "at": before.size, "d": b64(data), "sha": after.sha,
             "prev": before.sha}
        )  # fmt: skip
        self.batch.states[after.sha] = after
        self.record(op, rel, after.size, before.sha, after.sha)
        return before, after, findings, refusal

    def stage_write(
        self,
        parts: tuple[str, ...],
        content: bytes,
        op: str,
        shown: str,
        *,
        before: FileState | None,
        old: bytes | None = None,
        scan: bool = True,
        keep_before: bool = True,
    ) -> tuple[FileState, list[Finding], str | None]:
        """Plan a whole new content. The old version is kept as the old bytes of the
        one changed region when that is small, else as the old file itself (not at
        all without ``keep_before``: a redaction drops it)."""
        rel = "/".join(parts)
        after = state_of(content, resumable=True)
        if before is None:
            self._count_new_folders(parts)
            # a new file's version is found by a reference to it (a later version of
            # the file takes the same record's place, and counts what it adds)
            self.usage.versions += ref_bytes(after.sha, live_ref(rel))
        findings: list[Finding] = []
        refusal = None
        splice = None
        if before is not None and old is None and keep_before:
            old = self.content(parts, shown)
        if before is not None and old is not None and keep_before:
            splice = Splice.between(old, content)
            if splice.changed > _SPLICE_SHARE * max(len(old), len(content)):
                splice = None
        if scan:
            if splice is not None:
                findings, refusal = self.scan(rel, content[: splice.offset], splice.inserted)
            else:
                findings, refusal = self.scan(rel, b"", content)
        if before is not None and before.sha == after.sha:
            pass  # the same content again: a new audit line, no new version
        elif before is not None and splice is not None:
            self.usage.versions += ref_bytes(before.sha, splice_ref(after.sha, splice))
            self.ops.append(
                {"k": "s", "p": rel, "at": splice.offset, "rm": b64(splice.removed),
                 "in": b64(splice.inserted), "sha": after.sha, "prev": before.sha}
            )  # fmt: skip
        else:
            kept = before if keep_before else None
            if kept is not None:
                self.usage.versions += kept.size
            self.ops.append(
                {"k": "w", "p": rel, "d": b64(content), "sha": after.sha,
                 "prev": None if kept is None else kept.sha}
            )  # fmt: skip
        self._set(rel, before, Known(after, content[-SEAM_OVERLAP:], content))
        self.batch.states[after.sha] = after
        self.batch.contents[after.sha] = content
        self.record(op, rel, len(content), None if before is None else before.sha, after.sha)
        return after, findings, refusal

    def _count_new_folders(self, parts: tuple[str, ...]) -> None:
        """Count the folders a new file's write makes on its way (``d/`` of ``d/x.md``):
        removing a folder counts it out, so a folder a write made and nobody counted
        would drive the count below what the store holds and free ``max_files`` for
        good with each folder removed. Not marked as made: later mutations of the batch
        writing into the same folder stay in the batch (see :meth:`_folder_exists`)."""
        for depth in range(1, len(parts)):
            if not self._folder_exists(parts[:depth]):
                self.usage.dirs += len(parts) - depth
                return

    def _folder_exists(self, parts: tuple[str, ...]) -> bool:
        """Whether the folder is there once the batch so far is applied."""
        rel = "/".join(parts)
        if rel in self.made or rel in self.batch.made:
            return True
        if self._hidden(parts):
            return False
        if self.batch.root_fd is not None:  # the disk first: a command writing thousands
            # of files into a folder it has finds it there, without a walk of the batch
            with _fs.opened_dir(self.batch.root_fd, parts[:-1], create=False, shown=rel) as fd:
                if fd is not None and _fs.kind_at(fd, parts[-1]) == "dir":
                    return True
        prefix = rel + "/"
        return any(p.startswith(prefix) for p in self.view) or any(
            p.startswith(prefix) for p in self.batch.view
        )  # a file of this batch is in it: its write makes the folder

    def stage_delete_file(self, parts: tuple[str, ...], shown: str, kind: str) -> str | None:
        rel = "/".join(parts)
        before = self.state(parts, shown)[0] if kind == "file" else None
        if before is not None:
            self.usage.versions += before.size
        self._set(rel, before, Known(None))
        self.gone.add(rel)
        self.ops.append({"k": "d", "p": rel, "prev": None if before is None else before.sha})
        self.record("delete", rel, 0, None if before is None else before.sha, None)
        return None if before is None else before.sha

    def stage_delete_tree(self, parts: tuple[str, ...], shown: str) -> list[str]:
        rel = "/".join(parts)
        if self.batch.touches(rel) or any(p.startswith(rel + "/") for p in self.view):
            raise Conflict(rel)
        assert self.batch.root_fd is not None
        deleted: list[str] = []
        dirs = [rel]
        with _fs.opened_dir(self.batch.root_fd, parts, create=False, shown=shown) as fd:
            listing = [] if fd is None else list(_fs.walk_files(fd, rel + "/"))
        for sub, kind, _size in listing:
            if kind == "dir":
                dirs.append(sub)
            else:
                self.stage_delete_file(tuple(sub.split("/")), shown, kind)
                deleted.append(sub)
        for sub in reversed(dirs):  # deepest first, each audited as its creation was
            self.ops.append({"k": "r", "p": sub})
            self.usage.dirs -= 1
            self.record("rmdir", sub, 0, None, None)
        self.gone.add(rel)
        return deleted

    def stage_mkdir(self, parts: tuple[str, ...]) -> None:
        rel = "/".join(parts)
        self.ops.append({"k": "m", "p": rel})
        self.usage.dirs += 1
        self.made.add(rel)
        self.gone.discard(rel)
        self.record("mkdir", rel, 0, None, None)

    def discard(self) -> None:
        """Forget everything staged (a refused command keeps the store as it was)."""
        self.ops.clear()
        self.audit.clear()
        self.view.clear()
        self.gone.clear()
        self.made.clear()
        self.usage = self.batch.usage.copy()

    def merge(self, op: str, key: str | None, result: Any, attachment: Any) -> None:
        """Add this mutation to its batch."""
        batch = self.batch
        batch.view.update(self.view)
        batch.gone |= self.gone
        batch.made |= self.made
        batch.usage = self.usage
        commit = {
            "op_id": self.op_id,
            "key": key,
            "op": op,
            "ops": self.ops,
            "audit": [_line(e) for e in self.audit],
            "result": result,
            "attachment": attachment,
        }
        batch.commits.append(commit)
        if key is not None:
            batch.keys[key] = commit


def _line(entry: AuditEntry) -> dict[str, object]:
    """An audit entry as its line (its values are JSON already), leaving out the sparse
    fields while false, as its serializer does: an untainted run's lines stay what they
    were before taint existed."""
    line = dict(entry)
    for name in AuditEntry._sparse:
        if not line.get(name, True):
            del line[name]
    return line
