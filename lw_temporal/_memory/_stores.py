"""Memory stores with integrity: versions, audit, quotas, scanning, exactly-once.

Every mutation of a store runs in one critical section under the store's lock file
(``fcntl.flock``, so it holds across worker processes)::

    1. read the current files, check preconditions, quota and scan (nothing written)
    2. keep the new contents as content-addressed blobs (fsync)
    3. write a journal: the file operations, audit lines, result (fsync)  <- commit point
    4. apply the operations (temp file, fsync, rename, fsync dir)
    5. append the audit lines (fsync), update the usage counters
    6. turn the journal into the idempotency ledger entry of the activity

A crash after step 3 is rolled forward by the next lock holder, so a mutation is
either absent or complete, and its audit lines and ledger entry come with it. A retry
of the same activity (same namespace, workflow id, run id, activity id) finds the
ledger entry and returns the recorded result instead of applying the change again.

All bookkeeping lives under ``<dataDir>/.lw/stores/<kind>/<key>/``, never inside a
mounted folder. The methods are synchronous (they block on the lock and on fsync);
async callers run them in a thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from .._config import LwConfig
from .._definitions import MemoryQuota
from .._errors import (
    INVALID_REQUEST,
    MEMORY_BUSY,
    MEMORY_CONFLICT,
    MEMORY_NOT_FOUND,
    QUOTA_EXCEEDED,
    SCAN_BLOCKED,
    lw_error,
)
from .._ids import DataLayout, check_definition_id
from .._scan import DefaultScanner, Finding, Scanner
from .._scope import StoreKind, StoreRef
from . import _fs
from ._models import (
    ABSENT,
    AuditEntry,
    LedgerRecord,
    ListEntry,
    ListResult,
    MutationResult,
    Provenance,
    ReadResult,
    RedactResult,
    StagedChange,
    StagedChangeResult,
    StagedCommitResult,
    VersionInfo,
)

_R = TypeVar("_R", bound=BaseModel)
_SHA = re.compile(r"[0-9a-f]{64}")


class Cancelled(Exception):
    """The caller gave up (activity cancelled) while waiting for a store's lock."""


class StoreNotFound(LookupError):
    """A store, path or version an operator named does not exist (nothing changed)."""


STORE_FORMS = "workflow:<definition id>, pipeline:<pipeline key> or org"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.2f} MiB" if n >= 1024 * 1024 else f"{n} bytes"


@dataclass(slots=True)
class _Op:
    kind: str  # write | delete | mkdir | rmdir | redirect
    path: str  # store-relative; for redirect, the old blob sha
    sha_after: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "sha_after": self.sha_after}


@dataclass(slots=True)
class _Usage:
    bytes: int
    files: int


@dataclass
class _Txn:
    """The planned effect of one operation on one store, built before anything is
    written; ``view`` overlays staged changes on the disk so checks see both."""

    stores: MemoryStores
    store: StoreRef
    root_fd: int | None
    provenance: Provenance
    quota: MemoryQuota
    usage: _Usage
    op_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ops: list[_Op] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    view: dict[str, bytes | None] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    bytes_delta: int = 0
    files_delta: int = 0

    # -- reading the planned state ------------------------------------------------
    def _hidden(self, parts: tuple[str, ...]) -> bool:
        return any("/".join(parts[:i]) in self.gone for i in range(1, len(parts)))

    def current(self, parts: tuple[str, ...], shown: str) -> bytes | None:
        rel = "/".join(parts)
        if rel in self.view:
            return self.view[rel]
        if self.root_fd is None or self._hidden(parts):
            return None
        with _fs.opened_dir(self.root_fd, parts[:-1], create=False, shown=shown) as fd:
            return None if fd is None else _fs.read_at(fd, parts[-1], shown)

    def kind(self, parts: tuple[str, ...], shown: str) -> str | None:
        rel = "/".join(parts)
        if rel in self.view:
            return None if self.view[rel] is None else "file"
        if self.root_fd is None or self._hidden(parts) or rel in self.gone:
            return None
        with _fs.opened_dir(self.root_fd, parts[:-1], create=False, shown=shown) as fd:
            return None if fd is None else _fs.kind_at(fd, parts[-1])

    # -- staging ----------------------------------------------------------------
    def record(
        self,
        op: str,
        rel: str,
        size: int,
        before: str | None,
        after: str | None,
        detail: dict[str, str] | None = None,
    ) -> None:
        """One audit line; the provenance fields are the audit entry's own."""
        self.audit.append(
            AuditEntry(
                time=_now(),
                op_id=self.op_id,
                op=op,
                store=str(self.store),
                path=rel,
                bytes=size,
                sha256_before=before,
                sha256_after=after,
                detail=detail,
                **self.provenance.model_dump(),
            )
        )

    def stage_write(
        self,
        parts: tuple[str, ...],
        content: bytes,
        op: str,
        shown: str,
        *,
        keep_before: bool = True,
    ) -> tuple[str | None, str]:
        rel = "/".join(parts)
        before = self.current(parts, shown)
        before_sha = None if before is None else _sha(before)
        after_sha = _sha(content)
        if before is not None and keep_before:
            self.blobs.setdefault(before_sha or "", before)
        self.blobs[after_sha] = content
        self.ops.append(_Op("write", rel, after_sha))
        self.view[rel] = content
        self.gone.discard(rel)
        self.bytes_delta += len(content) - (0 if before is None else len(before))
        self.files_delta += 1 if before is None else 0
        self.record(op, rel, len(content), before_sha, after_sha)
        return before_sha, after_sha

    def stage_delete_file(self, parts: tuple[str, ...], shown: str, kind: str) -> str | None:
        rel = "/".join(parts)
        before = self.current(parts, shown) if kind == "file" else None
        before_sha = None if before is None else _sha(before)
        if before is not None:
            self.blobs.setdefault(before_sha or "", before)
            self.bytes_delta -= len(before)
            self.files_delta -= 1
        self.ops.append(_Op("delete", rel))
        self.view[rel] = None
        self.gone.add(rel)
        self.record("delete", rel, 0, before_sha, None)
        return before_sha

    def stage_delete_tree(self, parts: tuple[str, ...], shown: str) -> list[str]:
        rel = "/".join(parts)
        assert self.root_fd is not None
        deleted: list[str] = []
        dirs = [rel]
        with _fs.opened_dir(self.root_fd, parts, create=False, shown=shown) as fd:
            listing = [] if fd is None else list(_fs.walk_files(fd, rel + "/"))
        for sub, kind, _size in listing:
            if kind == "dir":
                dirs.append(sub)
            elif sub not in self.view or self.view[sub] is not None:
                self.stage_delete_file(tuple(sub.split("/")), shown, kind)
                deleted.append(sub)
        for sub in reversed(dirs):
            self.ops.append(_Op("rmdir", sub))
        self.gone.add(rel)
        return deleted

    def stage_mkdir(self, parts: tuple[str, ...]) -> None:
        rel = "/".join(parts)
        self.ops.append(_Op("mkdir", rel))
        self.gone.discard(rel)
        self.record("mkdir", rel, 0, None, None)

    # -- checks -------------------------------------------------------------------
    def quota_problem(self, path: str, size: int | None = None) -> str | None:
        q = self.quota
        if size is not None and size > q.max_file_bytes:
            return (
                f"{path} would be {_mib(size)}, over the per-file quota of "
                f"{_mib(q.max_file_bytes)} (MemoryQuota.max_file_bytes); split the file"
            )
        total = self.usage.bytes + self.bytes_delta
        if self.bytes_delta > 0 and total > q.max_bytes:
            return (
                f"store {self.store} would hold {_mib(total)}, over its quota of "
                f"{_mib(q.max_bytes)} (MemoryQuota.max_bytes); delete or condense old notes, "
                "or raise the quota"
            )
        files = self.usage.files + self.files_delta
        if self.files_delta > 0 and files > q.max_files:
            return (
                f"store {self.store} would hold {files} files, over its quota of "
                f"{q.max_files} (MemoryQuota.max_files); merge small notes or raise the quota"
            )
        return None

    def scan(self, rel: str, content: bytes) -> tuple[list[Finding], str | None]:
        findings = list(self.stores.scanner.scan(rel, content))
        blocking = [f for f in findings if f.blocking]
        if not blocking:
            return findings, None
        what = "; ".join(f"{f.rule} at line {f.line} ({f.excerpt})" for f in blocking)
        return findings, (
            f"the content contains {what}. Secrets and blocked personal data must not be "
            "stored in memory: remove them (refer to a secret manager instead) and write again"
        )


def _check_precondition(expected: str | None, actual: str | None, shown: str, who: str) -> None:
    if expected is None:
        return
    if expected == ABSENT:
        if actual is not None:
            raise lw_error(
                MEMORY_CONFLICT,
                f"{who}: {shown} already exists (sha256 {actual}) but the write required it "
                "to be absent; read it and write with if_sha256 set to its content_sha256",
            )
        return
    if not _SHA.fullmatch(expected):
        raise lw_error(
            INVALID_REQUEST,
            f"{who}: if_sha256 for {shown} must be a lowercase sha256 hex digest or "
            f"{ABSENT!r}, got {expected!r}",
        )
    if actual != expected:
        now = "does not exist" if actual is None else f"is at sha256 {actual}"
        raise lw_error(
            MEMORY_CONFLICT,
            f"{who}: {shown} {now}, not at the expected {expected}: another writer changed "
            "it; read it again, merge, and retry with the new content_sha256",
        )


class MemoryStores:
    """The memory stores of one data dir: the admin API (keyed by :class:`StoreRef`,
    paths relative to the store root) that the ``lw.memory.*`` activities, the bash
    capture, the CLI and dreaming's promotion all go through.

    Args:
        layout: the data dir layout.
        scanner: checks every new content before it is written; defaults to
            :class:`DefaultScanner` (blocks secrets, reports personal data).
        quota: the quota of a store; defaults to :class:`MemoryQuota` defaults.
        lock_timeout: seconds to wait for a store's lock before failing retryably.
    """

    def __init__(
        self,
        layout: DataLayout,
        *,
        scanner: Scanner | None = None,
        quota: Callable[[StoreRef], MemoryQuota] | None = None,
        lock_timeout: float = 300.0,
    ) -> None:
        self.layout = layout
        self.scanner: Scanner = scanner if scanner is not None else DefaultScanner()
        self._quota = quota or (lambda _store: MemoryQuota())
        self.lock_timeout = lock_timeout

    @classmethod
    def for_config(
        cls,
        config: LwConfig,
        *,
        scanner: Scanner | None = None,
        store_quota: MemoryQuota | None = None,
    ) -> MemoryStores:
        """Workflow stores take their definition's ``quota``; pipeline, org and
        dreaming stores take ``store_quota`` (default :class:`MemoryQuota`)."""
        default = store_quota or MemoryQuota()

        def quota(store: StoreRef) -> MemoryQuota:
            if store.kind is StoreKind.WORKFLOW and store.key in config.definitions:
                return config.definitions[store.key].quota
            return default

        return cls(config.layout, scanner=scanner, quota=quota)

    def quota(self, store: StoreRef) -> MemoryQuota:
        return self._quota(store)

    # -- locations ------------------------------------------------------------------
    def root(self, store: StoreRef) -> Path:
        return store.path(self.layout)

    def state_dir(self, store: StoreRef) -> Path:
        return self.layout.state / "stores" / store.kind.value / store.key

    # -- names an operator types ---------------------------------------------------------
    def known_stores(self, kind: StoreKind) -> list[str]:
        """The keys of the stores of ``kind`` that have files or bookkeeping."""
        folders = (
            self.layout.memory / ("workflows" if kind is StoreKind.WORKFLOW else "pipelines"),
            self.layout.state / "stores" / kind.value,
        )
        return sorted({p.name for f in folders if f.is_dir() for p in f.iterdir() if p.is_dir()})

    def find_store(self, text: str) -> StoreRef:
        """The existing store ``text`` names: ``workflow:<id>``, ``pipeline:<key or a
        unique prefix>`` or ``org``."""
        kind_text, sep, key = text.partition(":")
        if kind_text == "org" and key in ("", "org"):
            store = StoreRef(StoreKind.ORG, "org")
        elif kind_text == "workflow" and sep and key:
            try:
                store = StoreRef(StoreKind.WORKFLOW, check_definition_id(key))
            except ValueError as err:
                raise StoreNotFound(f"STORE {text!r}: {err}") from None
        elif kind_text == "pipeline" and sep and key:
            if not re.fullmatch(r"[0-9a-f]{1,64}", key):
                raise StoreNotFound(
                    f"STORE {text!r}: a pipeline key is lowercase hex (sha256), "
                    "as in memory/pipelines/<key>/"
                )
            matches = [k for k in self.known_stores(StoreKind.PIPELINE) if k.startswith(key)]
            if len(key) < 64 and len(matches) > 1:
                raise StoreNotFound(
                    f"STORE {text!r} matches {len(matches)} pipeline stores "
                    f"({', '.join(m[:16] for m in matches)}); give more of the key"
                )
            store = StoreRef(StoreKind.PIPELINE, matches[0] if len(matches) == 1 else key)
        else:
            raise StoreNotFound(f"STORE {text!r} is not a memory store; write {STORE_FORMS}")
        if not self.root(store).is_dir() and not self.state_dir(store).is_dir():
            names = self.known_stores(store.kind) if store.kind is not StoreKind.ORG else []
            listed = f" (known {store.kind.value} stores: {', '.join(names)})" if names else ""
            raise StoreNotFound(
                f"no store {self.label(store)} in data dir {self.layout.root}{listed}"
            )
        return store

    @staticmethod
    def label(store: StoreRef) -> str:
        """A store as an operator spells it (``org``, not ``org:org``)."""
        return "org" if store.kind is StoreKind.ORG else str(store)

    def admin_path(self, store: StoreRef, path: str) -> tuple[str, str]:
        """``path`` relative to the store root, cleaned as every mutation cleans it, and
        how messages show it (``STORE:PATH``)."""
        parts = _fs.clean_relative(path, f"{self.label(store)}:{path}")
        if not parts:
            raise StoreNotFound(f"{self.label(store)}:{path} is the store root; name a file in it")
        rel = "/".join(parts)
        return rel, f"{self.label(store)}:{rel}"

    def find_version(self, store: StoreRef, rel: str, prefix: str) -> str:
        """The kept version of ``rel`` that ``prefix`` (7 to 64 hex digits) names;
        addresses from before a redaction resolve too."""
        where = f"{self.label(store)}:{rel}"
        wanted = prefix.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{7,64}", wanted):
            raise StoreNotFound(
                f"SHA256 {prefix!r} is not a sha256: give the 64 hex digits shown by "
                "'memory versions' (or a unique prefix of at least 7)"
            )
        known: dict[str, None] = {v.sha256: None for v in self.versions(store, rel)}
        if not known:
            raise StoreNotFound(f"{where} has no kept versions (never written to this store)")
        known.update({sha: None for sha in self._version_shas(store, rel)})
        matches = [sha for sha in known if sha.startswith(wanted)]
        if len(matches) != 1:
            problem = "is not a kept version of" if not matches else "matches several versions of"
            raise StoreNotFound(f"{prefix} {problem} {where}; see 'lw-temporal memory versions'")
        if self.blob(store, matches[0]) is None:
            raise StoreNotFound(f"version {matches[0]} of {where} is no longer kept (pruned)")
        return matches[0]

    # -- reads (no lock: files are replaced atomically) --------------------------------
    def read(
        self,
        store: StoreRef,
        path: str,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        shown: str | None = None,
    ) -> ReadResult:
        """A file's content and ``content_sha256``; ``exists=False`` if it is absent
        (including in a store never written)."""
        shown = shown or f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        if not parts:
            raise lw_error(INVALID_REQUEST, f"{shown} is the store's root folder; list it")
        root_fd = _fs.open_root(self.root(store), create=False, shown=shown)
        if root_fd is None:
            return ReadResult(path=shown, exists=False)
        try:
            with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=shown) as fd:
                data = None if fd is None else _fs.read_at(fd, parts[-1], shown)
        finally:
            os.close(root_fd)
        if data is None:
            return ReadResult(path=shown, exists=False)
        end = len(data) if max_bytes is None else offset + max_bytes
        return ReadResult(
            path=shown,
            exists=True,
            content=data[offset:end].decode("utf-8", errors="replace"),
            content_sha256=_sha(data),
            size=len(data),
            offset=offset,
            truncated=end < len(data),
        )

    def list_files(
        self,
        store: StoreRef,
        path: str = "",
        *,
        recursive: bool = True,
        limit: int = 10_000,
        shown: str | None = None,
    ) -> ListResult:
        """Files and folders below ``path`` (store-relative); a missing store or folder
        lists as empty. Links are listed as ``link`` and never entered."""
        shown = shown or f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        rel = "/".join(parts)
        root_fd = _fs.open_root(self.root(store), create=False, shown=shown)
        if root_fd is None:
            return ListResult(path=shown)
        entries: list[ListEntry] = []
        truncated = False
        try:
            with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=shown) as parent:
                kind = (
                    None if parent is None else (_fs.kind_at(parent, parts[-1]) if parts else "dir")
                )
            if kind == "file":
                data = self.read(store, rel)
                return ListResult(
                    path=shown, entries=(ListEntry(path=rel, kind="file", size=data.size),)
                )
            if kind == "link":
                raise _fs._link_error(shown, parts[-1])
            with _fs.opened_dir(root_fd, parts, create=False, shown=shown) as fd:
                if fd is not None:
                    prefix = f"{rel}/" if rel else ""
                    for sub, k, size in _fs.walk_files(fd, prefix, recursive=recursive):
                        if len(entries) >= limit:
                            truncated = True
                            break
                        entries.append(ListEntry(path=sub, kind=k, size=size))
        finally:
            os.close(root_fd)
        return ListResult(path=shown, entries=tuple(entries), truncated=truncated)

    # -- mutations ----------------------------------------------------------------------
    def write(
        self,
        store: StoreRef,
        path: str,
        content: bytes,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Create or replace a file."""
        return self._file_op(
            store, path, provenance, "write", shown, cancel,
            lambda before: (content, content), if_sha256,
        )  # fmt: skip

    def append(
        self,
        store: StoreRef,
        path: str,
        content: bytes,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Add ``content`` at the end of a file (creating it); only the added bytes
        are scanned, so an old finding does not block every later append."""
        return self._file_op(
            store, path, provenance, "append", shown, cancel,
            lambda before: ((before or b"") + content, content), if_sha256,
        )  # fmt: skip

    def replace(
        self,
        store: StoreRef,
        path: str,
        old: str,
        new: str,
        *,
        provenance: Provenance,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Replace the single occurrence of ``old`` with ``new`` (``str_replace``)."""
        where = shown or f"{store}:{path}"

        def edit(before: bytes | None) -> tuple[bytes, bytes]:
            if before is None:
                raise lw_error(MEMORY_NOT_FOUND, f"{provenance.who()}: {where} does not exist")
            try:
                text = before.decode("utf-8")
            except UnicodeDecodeError:
                raise lw_error(INVALID_REQUEST, f"{where} is not UTF-8 text") from None
            count = text.count(old)
            if count != 1:
                problem = (
                    "does not contain the text to replace; read it and copy the text exactly"
                    if count == 0
                    else f"contains the text to replace {count} times; include more "
                    "surrounding text so that it occurs once"
                )
                raise lw_error(INVALID_REQUEST, f"{provenance.who()}: {where} {problem}")
            result = text.replace(old, new, 1).encode("utf-8")
            return result, result

        return self._file_op(store, path, provenance, "replace", shown, cancel, edit, if_sha256)

    def restore(
        self,
        store: StoreRef,
        path: str,
        sha256: str,
        *,
        provenance: Provenance,
        shown: str | None = None,
    ) -> MutationResult:
        """Make a kept version the current content again (a new, audited version)."""
        content = self.blob(store, sha256)
        where = shown or f"{store}:{path}"
        if content is None:
            raise lw_error(
                MEMORY_NOT_FOUND,
                f"{where}: no kept version {sha256}; see versions() for what is kept",
            )
        return self._file_op(
            store, path, provenance, "restore", shown, None, lambda _b: (content, b""), None
        )

    def _file_op(
        self,
        store: StoreRef,
        path: str,
        provenance: Provenance,
        op: str,
        shown: str | None,
        cancel: threading.Event | None,
        edit: Callable[[bytes | None], tuple[bytes, bytes]],
        if_sha256: str | None,
    ) -> MutationResult:
        shown = shown or f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        who = provenance.who()
        if not parts:
            raise lw_error(INVALID_REQUEST, f"{who}: {shown} is a folder; name a file inside it")

        def body(txn: _Txn) -> MutationResult:
            kind = txn.kind(parts, shown)
            if kind == "link":
                raise _fs._link_error(shown, parts[-1])
            if kind not in (None, "file"):
                raise lw_error(INVALID_REQUEST, f"{who}: {shown} is a {kind}, not a file")
            before = txn.current(parts, shown)
            before_sha = None if before is None else _sha(before)
            _check_precondition(if_sha256, before_sha, shown, who)
            new, to_scan = edit(before)
            findings: list[Finding] = []
            if to_scan:
                findings, blocked = txn.scan("/".join(parts), to_scan)
                if blocked:
                    raise lw_error(SCAN_BLOCKED, f"{who}: {op} to {shown} refused: {blocked}")
            txn.stage_write(parts, new, op, shown)
            problem = txn.quota_problem(shown, len(new))
            if problem:
                raise lw_error(QUOTA_EXCEEDED, f"{who}: {op} to {shown} refused: {problem}")
            return MutationResult(
                path=shown,
                op=op,
                content_sha256=_sha(new),
                previous_sha256=before_sha,
                bytes=len(new),
                findings=tuple(findings),
            )

        return self._mutate(store, provenance, op, body, MutationResult, cancel)

    def delete(
        self,
        store: StoreRef,
        path: str,
        *,
        provenance: Provenance,
        recursive: bool = False,
        if_sha256: str | None = None,
        shown: str | None = None,
        cancel: threading.Event | None = None,
    ) -> MutationResult:
        """Remove a file, or a folder with everything in it when ``recursive``."""
        shown = shown or f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        who = provenance.who()
        if not parts:
            raise lw_error(
                INVALID_REQUEST, f"{who}: {shown} is the store root; delete what is inside it"
            )

        def body(txn: _Txn) -> MutationResult:
            kind = txn.kind(parts, shown)
            if kind is None:
                raise lw_error(MEMORY_NOT_FOUND, f"{who}: {shown} does not exist")
            if kind == "dir":
                if not recursive:
                    raise lw_error(
                        INVALID_REQUEST,
                        f"{who}: {shown} is a folder; pass recursive=True to delete it and "
                        "everything in it",
                    )
                if if_sha256 is not None:
                    raise lw_error(INVALID_REQUEST, f"{who}: if_sha256 applies to files only")
                deleted = txn.stage_delete_tree(parts, shown)
                return MutationResult(
                    path=shown,
                    op="delete",
                    content_sha256=None,
                    previous_sha256=None,
                    bytes=0,
                    deleted=tuple(deleted),
                )
            before = txn.current(parts, shown) if kind == "file" else None
            _check_precondition(if_sha256, None if before is None else _sha(before), shown, who)
            before_sha = txn.stage_delete_file(parts, shown, kind)
            return MutationResult(
                path=shown,
                op="delete",
                content_sha256=None,
                previous_sha256=before_sha,
                bytes=0,
                deleted=("/".join(parts),),
            )

        return self._mutate(store, provenance, "delete", body, MutationResult, cancel)

    def commit_staged(
        self,
        store: StoreRef,
        changes: Sequence[StagedChange],
        provenance: Provenance,
        *,
        attachment: Any = None,
        cancel: threading.Event | None = None,
    ) -> StagedCommitResult:
        """Apply one bash command's changes to one store, all or nothing.

        Deletes are applied first, then folders made, then files written. If any
        change breaks the quota, the scan or the path rules, nothing is applied (the
        store keeps its previous versions) and the result says why, per path. When
        applied, each file gets a version and an audit line with ``provenance``.
        ``attachment`` (JSON-able, e.g. the command's own result) is kept in the
        idempotency ledger with the commit, for :meth:`recorded`.
        """
        order = {"delete": 0, "mkdir": 1, "write": 2}
        ordered = sorted(changes, key=lambda c: (order[c.kind], c.path.count("/")))

        def body(txn: _Txn) -> StagedCommitResult:
            results: list[StagedChangeResult] = []
            rejected = False
            for change in ordered:
                res = self._stage_one(txn, change)
                rejected = rejected or res.status == "rejected"
                results.append(res)
            if not rejected:
                problem = txn.quota_problem(str(store))
                if problem:
                    rejected = True
                    results = [
                        r.model_copy(update={"status": "rejected", "reason": problem})
                        if r.kind == "write"
                        else r
                        for r in results
                    ]
            if rejected:
                txn.ops.clear()
                txn.audit.clear()
                results = [
                    r if r.status == "rejected" else r.model_copy(update={"status": "rolled_back"})
                    for r in results
                ]
            return StagedCommitResult(
                store=str(store), applied=not rejected, changes=tuple(results)
            )

        return self._mutate(
            store, provenance, "bash", body, StagedCommitResult, cancel, attachment=attachment
        )

    def _stage_one(self, txn: _Txn, change: StagedChange) -> StagedChangeResult:
        shown = f"{txn.store}:{change.path}"
        base = StagedChangeResult(path=change.path, kind=change.kind, status="applied")
        try:
            parts = _fs.clean_relative(change.path, shown)
            if not parts:
                raise lw_error(INVALID_REQUEST, "the store root itself cannot change")
            kind = txn.kind(parts, shown)
            if change.kind == "delete":
                if kind is None:
                    return base
                if kind == "dir":
                    txn.stage_delete_tree(parts, shown)
                    return base
                before = txn.stage_delete_file(parts, shown, kind)
                return base.model_copy(update={"sha256_before": before})
            if change.kind == "mkdir":
                if kind == "dir":
                    return base
                if kind is not None:
                    raise lw_error(INVALID_REQUEST, f"{shown} exists as a {kind}")
                txn.stage_mkdir(parts)
                return base
            if change.source is None:
                raise lw_error(INVALID_REQUEST, "a staged write needs a source file")
            if kind not in (None, "file"):
                raise lw_error(INVALID_REQUEST, f"{shown} exists as a {kind}")
            content = change.source.read_bytes()
            problem = txn.quota_problem(change.path, len(content))
            if problem:
                return base.model_copy(update={"status": "rejected", "reason": problem})
            findings, blocked = txn.scan(change.path, content)
            if blocked:
                return base.model_copy(
                    update={"status": "rejected", "reason": blocked, "findings": tuple(findings)}
                )
            before_sha, after_sha = txn.stage_write(parts, content, "write", shown)
            return base.model_copy(
                update={
                    "sha256_before": before_sha,
                    "sha256_after": after_sha,
                    "bytes": len(content),
                    "findings": tuple(findings),
                }
            )
        except ApplicationError as err:
            return base.model_copy(update={"status": "rejected", "reason": err.message})

    def redact(
        self,
        store: StoreRef,
        path: str,
        pattern: str,
        *,
        provenance: Provenance,
        regex: bool = False,
        replacement: str = "[REDACTED]",
    ) -> RedactResult:
        """Remove ``pattern`` (a literal, or a regex when ``regex``) from a file and from
        every kept version of it. Redacted versions get new content addresses; the old
        addresses redirect to them, so the audit log (append-only) stays resolvable."""
        shown = f"{store}:{path}"
        parts = _fs.clean_relative(path, shown)
        if not parts:
            raise lw_error(INVALID_REQUEST, f"{shown} is a folder; name a file")
        compiled = re.compile(pattern.encode() if regex else re.escape(pattern.encode()))
        rel = "/".join(parts)
        state = self.state_dir(store)

        def body(txn: _Txn) -> RedactResult:
            mapping: dict[str, str] = {}
            current = txn.current(parts, shown)
            current_sha = None if current is None else _sha(current)
            changed = current is not None and compiled.search(current) is not None
            if current is not None and changed:
                new = compiled.sub(replacement.encode(), current)
                _before, after = txn.stage_write(parts, new, "redact", shown, keep_before=False)
                assert current_sha is not None
                mapping[current_sha] = after
                current_sha = after
            for sha in self._version_shas(store, rel):
                resolved = self._resolve(state, sha)
                if resolved in mapping or resolved == current_sha:
                    continue
                data = self.blob(store, resolved)
                if data is None or compiled.search(data) is None:
                    continue
                clean = compiled.sub(replacement.encode(), data)
                mapping[resolved] = _sha(clean)
                txn.blobs[_sha(clean)] = clean
            for old, new_sha in mapping.items():
                txn.ops.append(_Op("redirect", old, new_sha))
            if mapping and not changed:
                txn.record("redact", rel, 0, current_sha, current_sha)
            if txn.audit:
                last = txn.audit[-1]
                txn.audit[-1] = last.model_copy(update={"detail": dict(mapping)})
            return RedactResult(
                path=shown,
                current_changed=changed,
                content_sha256=current_sha,
                versions_redacted=mapping,
            )

        return self._mutate(store, provenance, "redact", body, RedactResult, None)

    # -- versions, audit, ledger ------------------------------------------------------
    def blob(self, store: StoreRef, sha256: str) -> bytes | None:
        """A kept version's content by its sha256 (following redaction redirects)."""
        if not _SHA.fullmatch(sha256):
            raise lw_error(INVALID_REQUEST, f"{sha256!r} is not a sha256 hex digest")
        state = self.state_dir(store)
        path = self._blob_path(state, self._resolve(state, sha256))
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def versions(self, store: StoreRef, path: str) -> list[VersionInfo]:
        """The kept versions of one file, oldest first."""
        rel = "/".join(_fs.clean_relative(path, f"{store}:{path}"))
        state = self.state_dir(store)
        seen: dict[str, VersionInfo] = {}
        for entry in self.audit(store, path=rel):
            for sha, op in ((entry.sha256_before, "earlier"), (entry.sha256_after, entry.op)):
                if sha is None:
                    continue
                resolved = self._resolve(state, sha)
                if resolved in seen:
                    continue
                blob = self._blob_path(state, resolved)
                seen[resolved] = VersionInfo(
                    sha256=resolved,
                    bytes=blob.stat().st_size if blob.exists() else 0,
                    time=entry.time,
                    op=op,
                    workflow_id=entry.workflow_id,
                    actor=entry.actor,
                    available=blob.exists(),
                )
        return list(seen.values())

    def _version_shas(self, store: StoreRef, rel: str) -> list[str]:
        shas: list[str] = []
        for entry in self.audit(store, path=rel):
            shas += [s for s in (entry.sha256_before, entry.sha256_after) if s is not None]
        return list(dict.fromkeys(shas))

    def audit(self, store: StoreRef, *, path: str | None = None) -> list[AuditEntry]:
        """The store's audit log, oldest first (optionally for one path)."""
        log = self.state_dir(store) / "audit.jsonl"
        try:
            lines = log.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        entries = [AuditEntry.model_validate_json(line) for line in lines if line.strip()]
        return entries if path is None else [e for e in entries if e.path == path]

    def recorded(self, store: StoreRef, provenance: Provenance) -> LedgerRecord | None:
        """What the activity of ``provenance`` already committed to ``store``, if any:
        a retried activity returns this instead of acting again."""
        key = provenance.idempotency_key
        if key is None:
            return None
        state = self.state_dir(store)
        record = self._ledger_get(state, key)
        if record is None and any((state / "journal").glob("*.json")):
            with self._locked(store, None):  # rolls forward a crashed commit
                record = self._ledger_get(state, key)
        return record

    def prune_versions(self, store: StoreRef, *, keep_last: int = 20) -> int:
        """Drop the content of all but the last ``keep_last`` versions of each file
        (every version stays listed, as unavailable); returns how many contents were
        removed. Appends keep a whole copy per version, so a long log needs this."""
        if keep_last < 1:
            raise ValueError("keep_last must be at least 1 (the current version)")
        state = self.state_dir(store)
        with self._locked(store, None):
            history: dict[str, dict[str, None]] = {}
            for entry in self.audit(store):
                shas = history.setdefault(entry.path, {})
                for sha in (entry.sha256_before, entry.sha256_after):
                    if sha is not None:
                        resolved = self._resolve(state, sha)
                        shas.pop(resolved, None)
                        shas[resolved] = None  # most recent last
            keep = {sha for shas in history.values() for sha in list(shas)[-keep_last:]}
            removed = 0
            for blob in (state / "blobs").glob("*/*"):
                if blob.name not in keep and not blob.name.startswith(_fs.TMP_PREFIX):
                    blob.unlink()
                    removed += 1
        return removed

    def prune_ledger(self, store: StoreRef, older_than: timedelta) -> int:
        """Forget exactly-once records older than ``older_than`` (longer than any
        activity's retries can last); returns how many were removed."""
        cutoff = time.time() - older_than.total_seconds()
        removed = 0
        with self._locked(store, None):
            for record in (self.state_dir(store) / "ledger").glob("*.json"):
                if record.stat().st_mtime < cutoff:
                    record.unlink()
                    removed += 1
        return removed

    def recount(self, store: StoreRef) -> dict[str, int]:
        """Recompute the usage counters from the files (after edits made outside)."""
        with self._locked(store, None):
            root_fd = _fs.open_root(self.root(store), create=False, shown=str(store))
            usage = self._count(root_fd)
            if root_fd is not None:
                os.close(root_fd)
            self._write_usage(self.state_dir(store), usage)
        return {"bytes": usage.bytes, "files": usage.files}

    # -- machinery ---------------------------------------------------------------------
    @contextmanager
    def _locked(self, store: StoreRef, cancel: threading.Event | None) -> Iterator[None]:
        state = self.state_dir(store)
        state.mkdir(parents=True, exist_ok=True)
        fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout
            delay = 0.0001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled() from None
                    if time.monotonic() > deadline:
                        raise lw_error(
                            MEMORY_BUSY,
                            f"store {store} stayed locked for {self.lock_timeout:.0f}s; "
                            "another writer holds it (this is retried)",
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.002)
            self._recover(store)
            yield
        finally:
            os.close(fd)

    def _mutate(
        self,
        store: StoreRef,
        provenance: Provenance,
        op: str,
        body: Callable[[_Txn], _R],
        result_type: type[_R],
        cancel: threading.Event | None,
        *,
        attachment: Any = None,
    ) -> _R:
        key = provenance.idempotency_key
        state = self.state_dir(store)
        with self._locked(store, cancel):
            if key is not None:
                record = self._ledger_get(state, key)
                if record is not None:
                    if record.op != op:
                        raise lw_error(
                            INVALID_REQUEST,
                            f"{provenance.who()}: activity {provenance.activity_id} already "
                            f"committed a {record.op!r} to {store}; it cannot also {op}",
                        )
                    return result_type.model_validate(record.result).model_copy(
                        update={"replayed": True}
                    )
            root = self.root(store)
            root_fd = _fs.open_root(root, create=False, shown=str(store))
            try:
                txn = _Txn(
                    self, store, root_fd, provenance, self.quota(store), self._usage(state, root_fd)
                )
                result = body(txn)
                if txn.ops or (attachment is not None and key is not None):
                    if root_fd is None and txn.ops:
                        root_fd = _fs.open_root(root, create=True, shown=str(store))
                    txn.root_fd = root_fd
                    self._commit(state, txn, op, result, attachment, key)
                return result
            finally:
                if root_fd is not None:
                    os.close(root_fd)

    def _commit(
        self,
        state: Path,
        txn: _Txn,
        op: str,
        result: BaseModel,
        attachment: Any,
        key: tuple[str, str, str, str] | None,
    ) -> None:
        for sha, data in txn.blobs.items():
            self._put_blob(state, sha, data)
        usage = _Usage(txn.usage.bytes + txn.bytes_delta, txn.usage.files + txn.files_delta)
        journal = {
            "op_id": txn.op_id,
            "key": None if key is None else _key_hash(key),
            "op": op,
            "ops": [o.as_json() for o in txn.ops],
            "audit": [e.model_dump(mode="json") for e in txn.audit],
            "result": result.model_dump(mode="json"),
            "attachment": attachment,
            "usage": {"bytes": usage.bytes, "files": usage.files},
        }
        _fs.write_atomic(state / "journal" / f"{txn.op_id}.json", json.dumps(journal).encode())
        self._roll_forward(state, txn.root_fd, journal, txn.blobs, recovering=False)

    def _roll_forward(
        self,
        state: Path,
        root_fd: int | None,
        journal: dict[str, Any],
        blobs: dict[str, bytes],
        *,
        recovering: bool,
    ) -> None:
        for raw in journal["ops"]:
            op = _Op(raw["kind"], raw["path"], raw["sha_after"])
            try:
                self._apply(state, root_fd, op, blobs, recovering)
            except (ApplicationError, OSError):
                if not recovering:
                    raise
                # A recovered op whose path became unsafe (a link, a folder in the way)
                # is skipped rather than blocking the store forever.
        audit = journal["audit"]
        if audit and not (recovering and self._audit_has(state, journal["op_id"])):
            lines = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in audit)
            fd = os.open(
                state / "audit.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
            )
            try:
                os.write(fd, lines)
                os.fsync(fd)
            finally:
                os.close(fd)
        self._write_usage(state, _Usage(**journal["usage"]))
        pending = state / "journal" / f"{journal['op_id']}.json"
        if journal["key"] is not None:
            (state / "ledger").mkdir(exist_ok=True)
            os.replace(pending, state / "ledger" / f"{journal['key']}.json")
            _fs.fsync_dir(state / "ledger")
        else:
            pending.unlink(missing_ok=True)
        _fs.fsync_dir(state / "journal")

    def _apply(
        self,
        state: Path,
        root_fd: int | None,
        op: _Op,
        blobs: dict[str, bytes],
        recovering: bool,
    ) -> None:
        if op.kind == "redirect":
            assert op.sha_after is not None
            _fs.write_atomic(state / "redirects" / op.path, op.sha_after.encode())
            self._blob_path(state, op.path).unlink(missing_ok=True)
            return
        if root_fd is None:
            return
        parts = tuple(op.path.split("/"))
        shown = f"store path {op.path}"
        if op.kind == "mkdir":
            fd = _fs.open_dir(root_fd, parts, create=True, shown=shown)
            if fd is not None:
                os.close(fd)
            return
        create = op.kind == "write"
        with _fs.opened_dir(root_fd, parts[:-1], create=create, shown=shown) as fd:
            if fd is None:
                return
            name = parts[-1]
            if op.kind == "write":
                assert op.sha_after is not None
                data = blobs.get(op.sha_after)
                if data is None:
                    data = self.blob_at(state, op.sha_after)
                if recovering:
                    with suppress(ApplicationError, OSError):
                        if _sha(_fs.read_at(fd, name, shown) or b"\0") == op.sha_after:
                            return
                if data is None:
                    return
                _fs.write_atomic_at(fd, name, data)
            elif op.kind == "delete":
                with suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
            elif op.kind == "rmdir":
                with suppress(FileNotFoundError, OSError):
                    os.rmdir(name, dir_fd=fd)

    def _recover(self, store: StoreRef) -> None:
        state = self.state_dir(store)
        pending = sorted((state / "journal").glob("*.json"), key=lambda p: p.stat().st_mtime)
        if not pending:
            return
        root_fd = _fs.open_root(self.root(store), create=True, shown=str(store))
        try:
            for path in pending:
                try:
                    journal = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    path.unlink(missing_ok=True)  # torn before its fsync: never committed
                    continue
                self._roll_forward(state, root_fd, journal, {}, recovering=True)
        finally:
            if root_fd is not None:
                os.close(root_fd)

    def _audit_has(self, state: Path, op_id: str) -> bool:
        log = state / "audit.jsonl"
        try:
            with log.open("rb") as f:
                f.seek(max(0, log.stat().st_size - (1 << 20)))
                return f'"op_id":"{op_id}"'.encode() in f.read()
        except FileNotFoundError:
            return False

    def _ledger_get(self, state: Path, key: tuple[str, str, str, str]) -> LedgerRecord | None:
        try:
            raw = json.loads((state / "ledger" / f"{_key_hash(key)}.json").read_bytes())
        except FileNotFoundError:
            return None
        return LedgerRecord(op=raw["op"], result=raw["result"], attachment=raw.get("attachment"))

    @staticmethod
    def _blob_path(state: Path, sha: str) -> Path:
        return state / "blobs" / sha[:2] / sha

    def _resolve(self, state: Path, sha: str) -> str:
        for _ in range(16):
            try:
                sha = (state / "redirects" / sha).read_text().strip()
            except FileNotFoundError:
                return sha
        return sha

    def blob_at(self, state: Path, sha: str) -> bytes | None:
        try:
            return self._blob_path(state, self._resolve(state, sha)).read_bytes()
        except FileNotFoundError:
            return None

    def _put_blob(self, state: Path, sha: str, data: bytes) -> None:
        path = self._blob_path(state, sha)
        if not path.exists():
            _fs.write_atomic(path, data)

    def _usage(self, state: Path, root_fd: int | None) -> _Usage:
        try:
            raw = json.loads((state / "usage.json").read_bytes())
            return _Usage(int(raw["bytes"]), int(raw["files"]))
        except (FileNotFoundError, ValueError, KeyError):
            usage = self._count(root_fd)
            self._write_usage(state, usage)
            return usage

    @staticmethod
    def _count(root_fd: int | None) -> _Usage:
        if root_fd is None:
            return _Usage(0, 0)
        usage = _Usage(0, 0)
        for _rel, kind, size in _fs.walk_files(root_fd, ""):
            if kind == "file":
                usage.bytes += size
                usage.files += 1
        return usage

    @staticmethod
    def _write_usage(state: Path, usage: _Usage) -> None:
        _fs.write_atomic(
            state / "usage.json", json.dumps({"bytes": usage.bytes, "files": usage.files}).encode()
        )


def _key_hash(key: tuple[str, str, str, str]) -> str:
    return _sha("\0".join(key).encode())
