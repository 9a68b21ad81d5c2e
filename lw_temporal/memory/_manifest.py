"""Run manifests: which memory each agent run started from (the seeds' "Identity
Manifests").

When a run first touches the worker (its first activity, whatever it is), the worker
records, once, in the bookkeeping dir: the run's definition hash, the pipeline key,
and for every store it mounts the mode and the store's snapshot id (the tree id the
store's usage record keeps up to date, so recording costs a small read per store, not
a re-hash, and never a wait for the store's lock). Nothing is added to workflow
inputs: the manifest is derived from the activity's own scope, like every other scope
decision.

``readers`` answers the reverse question for a bad lesson: which runs started while a
given version of a file was current, from the store's audit log and the manifests'
start times.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

from .._ids import DataLayout
from .._scope import Scope, StoreRef
from .._taint import TaintBook
from . import _fs
from ._records import ManifestStore, RunManifest

if TYPE_CHECKING:
    from ._stores import MemoryStores

_log = logging.getLogger(__name__)
_recorded: set[tuple[str, str]] = set()
_recorded_lock = threading.Lock()


def manifests_dir(layout: DataLayout) -> Path:
    return layout.state / "manifests"


def manifest_path(layout: DataLayout, workflow_id: str) -> Path:
    key = hashlib.sha256(workflow_id.encode("utf-8", "surrogateescape")).hexdigest()
    return manifests_dir(layout) / f"{key}.json"


def record_manifest(
    layout: DataLayout, scope: Scope, *, run_id: str | None, workflow_type: str
) -> None:
    """Record ``scope``'s run manifest unless it already is (idempotent; the first
    activity of the run wins, a retry or a later activity finds it and does nothing).
    A manifest that cannot be written is logged, never a reason to fail the activity."""
    memo = (str(layout.root), scope.workflow_id)
    if memo in _recorded:
        return
    try:
        _record(layout, scope, run_id, workflow_type, memo)
    except (OSError, ApplicationError) as err:
        _log.warning("run manifest of %s not recorded: %s", scope.workflow_id, err)


def _record(
    layout: DataLayout, scope: Scope, run_id: str | None, workflow_type: str, memo: tuple[str, str]
) -> None:
    if memo in _recorded:
        return
    path = manifest_path(layout, scope.workflow_id)
    if path.exists():
        with _recorded_lock:
            _recorded.add(memo)
        return
    stores = _reader(layout)
    manifest = RunManifest(
        workflow_id=scope.workflow_id,
        run_id=run_id,
        workflow_type=workflow_type,
        role=scope.role.value,
        definition_id=None if scope.definition is None else scope.definition.id,
        definition_hash=None if scope.definition is None else scope.definition.definition_hash,
        pipeline_key=scope.pipeline_key,
        started=datetime.now(UTC).isoformat(timespec="microseconds"),
        stores=tuple(
            ManifestStore(
                mount=str(m.virtual),
                store=str(m.store),
                mode=m.mode.value,
                snapshot_id=stores.snapshot_id(m.store, wait=False),
            )
            for m in scope.mounts
            if m.store is not None
        ),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{_fs.TMP_PREFIX}{os.getpid()}-{threading.get_ident()}")
    # 0600, as every file of the bookkeeping: only the worker reads it.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(manifest.model_dump_json(indent=2).encode())
    try:
        os.link(tmp, path)  # first writer wins; never replaces a recorded manifest
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    with _recorded_lock:
        _recorded.add(memo)


_readers: dict[Path, MemoryStores] = {}


def _reader(layout: DataLayout) -> MemoryStores:
    """Stores to read snapshot ids with, one per data dir: building them (their
    scanner's fingerprint, their per-store file caches) cost more than the reads."""
    found = _readers.get(layout.root)
    if found is None:
        from ._stores import MemoryStores

        found = _readers[layout.root] = MemoryStores(layout)
    return found


def read_manifest(layout: DataLayout, workflow_id: str) -> RunManifest | None:
    """The run's manifest, with its taint (the worker's record, own or inherited
    through its tree) when it is tainted."""
    try:
        found = RunManifest.model_validate_json(manifest_path(layout, workflow_id).read_bytes())
    except FileNotFoundError:
        return None
    taint = TaintBook(layout).status(workflow_id, materialize=False)
    return found if taint is None else found.model_copy(update={"tainted": taint})


def manifests(layout: DataLayout) -> Iterator[RunManifest]:
    folder = manifests_dir(layout)
    if not folder.is_dir():
        return
    book = TaintBook(layout)
    for path in sorted(folder.glob("*.json")):
        try:
            found = RunManifest.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            continue
        taint = book.status(found.workflow_id, materialize=False)
        yield found if taint is None else found.model_copy(update={"tainted": taint})


def readers(stores: MemoryStores, store: StoreRef, rel: str, sha: str) -> list[RunManifest]:
    """The runs that mounted ``store`` and started while ``sha`` was ``rel``'s current
    version, oldest first."""
    versions = stores.files(store).versions
    spans: list[tuple[str, str | None]] = []  # [from, until) while current
    current_since: str | None = None
    for entry in stores.audit(store, path=rel):
        after = None if entry.sha256_after is None else versions.resolve(entry.sha256_after)
        if current_since is not None and after != sha:
            spans.append((current_since, entry.time))
            current_since = None
        if after == sha and current_since is None:
            current_since = entry.time
    if current_since is not None:
        spans.append((current_since, None))
    found = [
        m
        for m in manifests(stores.layout)
        if any(s.store == str(store) for s in m.stores)
        and any(start <= m.started and (end is None or m.started < end) for start, end in spans)
    ]
    return sorted(found, key=lambda m: m.started)


def tainted_readers(stores: MemoryStores, store: StoreRef, rel: str) -> list[tuple[str, str]]:
    """Who read a tainted version of ``rel``: ``(workflow id, how)``, in time order.
    A run that read the file while a tainted run's version of it was marked (its taint
    record or events say so), and every run that started while a version a tainted run
    wrote (a released one included) was current, with that version."""
    found: dict[str, tuple[str, str]] = {}
    book = TaintBook(stores.layout)
    wanted = f"{store}:{rel}"
    for record in book.records():
        for event in book.events(record.workflow_id):
            if event.read == wanted:
                found.setdefault(record.workflow_id, (event.time, f"read it: {event.reason}"))
    for version in stores.versions(store, rel):
        if not version.tainted:
            continue
        for manifest in readers(stores, store, rel, version.sha256):
            how = (
                f"started while {version.sha256[:12]} ({version.op} by {version.by()}) was current"
            )
            found.setdefault(manifest.workflow_id, (manifest.started, how))
    return [(wf, how) for wf, (_t, how) in sorted(found.items(), key=lambda kv: kv[1][0])]
