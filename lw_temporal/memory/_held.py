"""Held changes: what a tainted run wrote to a quarantined store, kept apart from it.

One folder per run and store, in the memory root's bookkeeping
(``.lw/quarantine/<run>/<kind>-<key>/``, never mounted): ``held.json`` (the changes:
one entry per path, the run's view of it, and what the store had there when the run
first changed it), ``blobs/`` (held file contents, named by their sha256 when held) and
``log.jsonl`` (each holding operation, with its provenance). ``held.json`` is replaced
atomically under the folder's lock, after the blobs it names are written, so a crash
leaves the earlier held state whole.

The run's view of the store is the store with its held entries over it: a held
``file`` shows its blob, ``gone`` hides the path (and a folder's contents), a
``dir`` shows a folder (``opaque``: made over one the store had, hiding what was below
it); a path with no entry, and no gone or opaque folder above it, is the store's.
Everyone else sees the store alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._base import FrozenModel
from .._locks import lock_exclusive
from .._scope import StoreKind, StoreRef
from .._taint._book import now
from . import _fs
from ._records import Provenance, ReadResult

if TYPE_CHECKING:
    from ._stores import MemoryStores

#: Exactly-once records kept per held set (the newest; a retry comes soon after).
_LEDGER_KEEP = 256
#: A store's state at a path: a sha256, ``dir:<digest of what is below>``, or absent.
Base = str | None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


class HeldEntry(FrozenModel):
    """One path of the run's view that differs from the store."""

    kind: Literal["file", "dir", "gone"]
    opaque: bool = False
    size: int = 0
    #: sha256 of the content when it was held (the blob's name).
    blob: str | None = None
    #: What the store had here when the run first changed it (compare-and-set).
    base: Base = None
    first: str
    last: str
    changes: int = 1


class HeldSet(FrozenModel):
    """A run's held changes to one store, and who the run is."""

    workflow_id: str
    run_id: str | None = None
    workflow_type: str | None = None
    namespace: str | None = None
    role: str | None = None
    store: str
    kind: StoreKind
    key: str
    #: The run's taint when the changes were first held (``tainted since ...: ...``).
    taint: str
    created: str
    updated: str
    #: Bumped by every change (a bash command checks its view was the latest).
    generation: int = 0
    entries: dict[str, HeldEntry] = {}
    #: Exactly-once: each holding activity's result, by its idempotency key's hash.
    ledger: dict[str, Any] = {}

    @property
    def ref(self) -> StoreRef:
        return StoreRef(self.kind, self.key)

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries.values() if e.kind == "file")


def quarantine_root(stores: MemoryStores) -> Path:
    return stores.layout.state / "quarantine"


def held_folder(stores: MemoryStores, workflow_id: str, store: StoreRef) -> Path:
    run = _digest(workflow_id)[:32]
    return quarantine_root(stores) / run / f"{store.kind.value}-{_digest(store.key)[:16]}"


@dataclass
class Viewed:
    """A path as the run sees it through its held changes."""

    kind: Literal["file", "dir"] | None
    content: bytes | None = None
    sha: str | None = None


@dataclass
class HeldStore:
    """A run's held changes to one store: reading the view, and changing it under the
    folder's lock (:meth:`locked`)."""

    stores: MemoryStores
    workflow_id: str
    store: StoreRef
    folder: Path = field(init=False)

    def __post_init__(self) -> None:
        self.folder = held_folder(self.stores, self.workflow_id, self.store)

    # -- the held set -----------------------------------------------------------------
    def load(self) -> HeldSet | None:
        try:
            return HeldSet.model_validate_json((self.folder / "held.json").read_bytes())
        except FileNotFoundError:
            return None

    def exists(self) -> bool:
        return os.path.exists(self.folder / "held.json")

    def blob_path(self, sha: str) -> Path:
        return self.folder / "blobs" / sha

    def blob(self, entry: HeldEntry) -> bytes:
        assert entry.blob is not None
        return self.blob_path(entry.blob).read_bytes()

    def put_blob(self, content: bytes) -> str:
        sha = hashlib.sha256(content).hexdigest()
        path = self.blob_path(sha)
        if not path.exists():
            _fs.write_atomic(path, content)
        return sha

    def save(self, held: HeldSet) -> None:
        """Make ``held`` the held state (blobs first, written by the caller), and drop
        blobs no entry names any more."""
        data = held.model_dump_json(indent=1).encode()
        _fs.write_atomic(self.folder / "held.json", data)
        wanted = {e.blob for e in held.entries.values() if e.blob}
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.folder / "blobs"):
                if name not in wanted:
                    with contextlib.suppress(OSError):
                        os.unlink(self.folder / "blobs" / name)

    def log(self, op: str, rel: str, provenance: Provenance, **detail: Any) -> None:
        line = {"time": now(), "op": op, "path": rel, **detail, **provenance.model_dump()}
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(self.folder / "log.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=True) + "\n")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The held set's lock (one holder at a time: the run's activities, a release,
        a rejection)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            lock_exclusive(fd)
            yield
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Drop the held changes (after a release or a rejection): the log stays."""
        for name in ("held.json",):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.folder / name)
        blobs = self.folder / "blobs"
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(blobs):
                os.unlink(blobs / name)

    # -- the run's view -------------------------------------------------------------
    def covering(self, held: HeldSet, rel: str) -> HeldEntry | None:
        """The entry that decides ``rel`` in the view: its own, or a gone or opaque
        folder above it (which hides the store below); ``None``: the store's."""
        entry = held.entries.get(rel)
        if entry is not None:
            return entry
        parts = rel.split("/")
        for i in range(len(parts) - 1, 0, -1):
            above = held.entries.get("/".join(parts[:i]))
            if above is not None and (above.kind == "gone" or above.kind == "file"):
                return HeldEntry(kind="gone", first=above.first, last=above.last)
            if above is not None and above.opaque:
                return HeldEntry(kind="gone", first=above.first, last=above.last)
        return None

    def view(self, held: HeldSet | None, rel: str) -> Viewed:
        """``rel`` as the run sees it."""
        entry = None if held is None else self.covering(held, rel)
        if entry is None:
            return self.store_view(rel)
        if entry.kind == "gone":
            return Viewed(None)
        if entry.kind == "dir":
            return Viewed("dir")
        content = self.blob(entry)
        return Viewed("file", content, hashlib.sha256(content).hexdigest())

    def store_view(self, rel: str) -> Viewed:
        root = self.stores.root(self.store)
        kind = _kind(root, rel)
        if kind == "file":
            content = self.stores.read_bytes(self.store, rel)
            if content is None:
                return Viewed(None)
            return Viewed("file", content, hashlib.sha256(content).hexdigest())
        return Viewed("dir" if kind == "dir" else None)

    def base(self, rel: str) -> Base:
        """What the store has at ``rel`` now, as a compare-and-set base."""
        seen = self.store_view(rel)
        if seen.kind == "file":
            return seen.sha
        if seen.kind == "dir":
            return "dir:" + tree_digest(self.stores, self.store, rel)
        return None

    def unmoved(self, rel: str, base: Base) -> bool:
        """Whether the store still has at ``rel`` what the run saw (``base``): the same
        version, or that version redacted since (its address redirects)."""
        now_base = self.base(rel)
        if now_base == base:
            return True
        if base is None or now_base is None or base.startswith("dir:"):
            return False
        return self.stores.files(self.store).versions.resolve(base) == now_base

    def read(self, held: HeldSet, rel: str, shown: str, offset: int, max_bytes: int) -> ReadResult:
        seen = self.view(held, rel)
        if seen.kind != "file" or seen.content is None:
            if seen.kind == "dir":
                from ..errors._kinds import INVALID_REQUEST, lw_error

                raise lw_error(INVALID_REQUEST, f"{shown} is a folder; list it")
            return ReadResult(path=shown, exists=False)
        data = seen.content
        end = min(len(data), offset + max_bytes)
        return ReadResult(
            path=shown,
            exists=True,
            content=data[offset:end].decode("utf-8", errors="replace"),
            content_sha256=seen.sha,
            size=len(data),
            offset=offset,
            truncated=end < len(data),
        )

    def files_below(
        self, held: HeldSet | None, rel: str, *, recursive: bool = True
    ) -> list[tuple[str, str, int]]:
        """``(path, kind, size)`` of what lies below folder ``rel`` in the view, sorted."""
        root = self.stores.root(self.store)
        prefix = f"{rel}/" if rel else ""
        found: dict[str, tuple[str, int]] = {}
        root_fd = _fs.open_root(root, create=False, shown=str(self.store))
        if root_fd is not None and _kind(root, rel) != "dir":
            os.close(root_fd)
            root_fd = None
        if root_fd is not None:
            try:
                parts = tuple(rel.split("/")) if rel else ()
                with _fs.opened_dir(root_fd, parts, create=False, shown=rel) as fd:
                    if fd is not None:
                        for sub, kind, size in _fs.walk_files(fd, prefix, recursive=recursive):
                            found[sub] = (kind, size)
            finally:
                os.close(root_fd)
        if held is not None:
            for path in list(found):
                if self.covering(held, path) is not None:
                    del found[path]
            for path, entry in held.entries.items():
                inside = path.startswith(prefix) and (recursive or "/" not in path[len(prefix) :])
                if inside and entry.kind != "gone":
                    hidden = self.covering(held, path) is not entry
                    if not hidden:
                        found[path] = (entry.kind, entry.size)
        return sorted((p, k, s) for p, (k, s) in found.items())


def _kind(root: Path, rel: str) -> str | None:
    parts = tuple(rel.split("/")) if rel else ()
    root_fd = _fs.open_root(root, create=False, shown=rel)
    if root_fd is None:
        return None
    try:
        if not parts:
            return "dir"
        with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=rel) as fd:
            return None if fd is None else _fs.kind_at(fd, parts[-1])
    except Exception:
        return None
    finally:
        os.close(root_fd)


def tree_digest(stores: MemoryStores, store: StoreRef, rel: str) -> str:
    """A digest of what lies below folder ``rel`` of the store (paths and contents),
    so a release can tell whether anything in it changed since the run saw it."""
    hasher = hashlib.sha256()
    root = stores.root(store)
    root_fd = _fs.open_root(root, create=False, shown=str(store))
    if root_fd is None:
        return hasher.hexdigest()
    try:
        parts = tuple(rel.split("/")) if rel else ()
        with _fs.opened_dir(root_fd, parts, create=False, shown=rel) as fd:
            listing = [] if fd is None else list(_fs.walk_files(fd, f"{rel}/" if rel else ""))
    finally:
        os.close(root_fd)
    for sub, kind, _size in listing:
        content = stores.read_bytes(store, sub) if kind == "file" else b""
        sha = hashlib.sha256(content or b"").hexdigest()
        hasher.update(f"{sub}\0{kind}\0{sha}\n".encode("utf-8", "surrogateescape"))
    return hasher.hexdigest()


def held_sets(stores: MemoryStores) -> Iterator[tuple[HeldStore, HeldSet]]:
    """Every held set of the data dir (each run's changes to each store)."""
    root = quarantine_root(stores)
    try:
        runs = sorted(os.listdir(root))
    except FileNotFoundError:
        return
    for run in runs:
        try:
            folders = sorted(os.listdir(root / run))
        except (NotADirectoryError, FileNotFoundError):
            continue
        for name in folders:
            try:
                held = HeldSet.model_validate_json((root / run / name / "held.json").read_bytes())
            except (OSError, ValueError):
                continue
            if held.entries:
                yield HeldStore(stores, held.workflow_id, held.ref), held
