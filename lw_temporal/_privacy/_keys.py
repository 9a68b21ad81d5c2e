"""Keys per run tree: which key a payload is sealed with, and where keys live.

A run tree is a top-level run and everything it started: ``pipeline_7f3a`` for the
orchestrator, its planners and their steps; ``run_<definition>@<token>`` for a planner
started alone and its steps; each dream, each retention run on its own. Its key id is
the tree's top-level workflow ID (already visible to whoever sees the workflow list),
so a payload's metadata names the one key it needs and a decode reads only that key.

:class:`KeyStore` is the interface a deployment can back with its KMS;
:class:`FileKeyStore` keeps one 32-byte key file per tree in the memory root's
bookkeeping (``.lw/keys/<tree>.key``, mode 0600, in a 0700 folder), which every worker
of the deployment shares. Shredding a tree's key leaves a tombstone
(``<tree>.shredded``) so that the ID cannot silently get a fresh key and look alive.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from pathlib import Path

from .._ids import InvalidWorkflowId, parse_workflow_id

#: The key of payloads encoded without any workflow (a codec server's ``/encode``
#: called without a tree, a standalone activity): shared, so ``forget`` cannot shred it.
SHARED_KEY_ID = "_shared"
KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:+@-]{0,199}")


class KeyShredded(Exception):
    """The tree's key was shredded (``lw-temporal forget``): its payloads stay sealed,
    and the ID cannot be given a new key."""

    def __init__(self, key_id: str) -> None:
        super().__init__(
            f"run tree {key_id!r} was forgotten: its key is shredded, so its payloads cannot "
            "be decoded and its workflow ID cannot be used again"
        )
        self.key_id = key_id


def check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id) or key_id in (".", ".."):
        raise ValueError(f"key id {key_id!r} is not a tree id (pattern {_KEY_ID.pattern})")
    return key_id


def tree_of(workflow_id: str | None) -> str:
    """The key id of the tree ``workflow_id`` belongs to: its top-level run's ID for an
    lw ID, the ID itself for any other workflow (when it is one safe file name, else a
    digest of it), :data:`SHARED_KEY_ID` without a workflow."""
    if not workflow_id:
        return SHARED_KEY_ID
    try:
        return parse_workflow_id(workflow_id).segments[0]
    except InvalidWorkflowId:
        pass
    if _KEY_ID.fullmatch(workflow_id) and workflow_id != SHARED_KEY_ID:
        return workflow_id
    return "h-" + hashlib.sha256(workflow_id.encode("utf-8", "surrogateescape")).hexdigest()[:40]


class KeyStore(ABC):
    """Where the codec's keys live: one key per run tree, created on the tree's first
    encoded payload, read on decode, destroyed by ``forget``.

    Back it with a KMS by implementing the three methods (a KMS usually wraps a data key
    per tree; shredding deletes the wrapped key). Every worker, client and codec server
    of one deployment must use the same store. The codec caches keys in memory for
    ``PrivacyOptions.key_cache_seconds``, so a shredded key stops working everywhere
    within that time.
    """

    @abstractmethod
    async def get(self, key_id: str) -> bytes | None:
        """The tree's key, or ``None`` when it has none (never made, or shredded: see
        :meth:`shredded`)."""

    @abstractmethod
    async def create(self, key_id: str) -> bytes:
        """The tree's key, made now if it has none; raises :class:`KeyShredded` for a
        tree whose key was shredded. Safe to call from several processes at once: all
        get the same key."""

    @abstractmethod
    async def shred(self, key_id: str, *, by: str) -> bool:
        """Destroy the tree's key and remember that it is gone; ``False`` when it had
        none."""

    async def shredded(self, key_id: str) -> bool:
        """Whether the tree's key was shredded (a store that cannot tell says no)."""
        return False


class FileKeyStore(KeyStore):
    """Keys as files under ``folder`` (default: ``<memory root>/.lw/keys``)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _key(self, key_id: str) -> Path:
        return self.folder / f"{check_key_id(key_id)}.key"

    def _tomb(self, key_id: str) -> Path:
        return self.folder / f"{check_key_id(key_id)}.shredded"

    def ready(self) -> None:
        """The folder, made (0700) when missing."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.folder, 0o700)

    async def get(self, key_id: str) -> bytes | None:
        return self.read(key_id)

    def read(self, key_id: str) -> bytes | None:
        try:
            with open(self._key(key_id), "rb") as handle:
                key = handle.read(KEY_BYTES + 1)
        except FileNotFoundError:
            return None
        return key if len(key) == KEY_BYTES else None

    async def create(self, key_id: str) -> bytes:
        return self.make(key_id)

    def make(self, key_id: str) -> bytes:
        existing = self.read(key_id)
        if existing is not None:
            return existing
        if self._tomb(key_id).exists():
            raise KeyShredded(key_id)
        self.ready()
        owner = _owner(self.folder)
        tmp = self.folder / f".{key_id}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            if owner is not None:
                os.fchown(fd, *owner)
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_bytes(KEY_BYTES))
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # first one wins
                os.link(tmp, self._key(key_id))  # exclusive, on NFS too
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        key = self.read(key_id)
        if key is None:
            raise OSError(f"key file {self._key(key_id)} could not be read back")
        return key

    async def shred(self, key_id: str, *, by: str) -> bool:
        return self.destroy(key_id, by=by)

    def destroy(self, key_id: str, *, by: str) -> bool:
        path = self._key(key_id)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tomb = {"key_id": key_id, "time": datetime.now(UTC).isoformat(), "by": by}
        tomb_path = self._tomb(key_id)
        tmp = tomb_path.with_name(f".{tomb_path.name}.{secrets.token_hex(8)}.tmp")
        tmp.write_text(json.dumps(tomb, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, tomb_path)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            # Overwrite before unlinking: a copy-on-write or journaled file system may
            # keep old blocks anyway, which is why keys belong in a KMS in production.
            os.pwrite(fd, secrets.token_bytes(KEY_BYTES), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.unlink(path)
        _fsync_dir(self.folder)
        return True

    async def shredded(self, key_id: str) -> bool:
        return self._tomb(key_id).exists()


def _owner(folder: Path) -> tuple[int, int] | None:
    """Whom a key made in ``folder`` must belong to, when that is not this process:
    root starting a run (``lw-temporal run`` as root) for workers running as another
    user, who must still read the key. ``None`` when the key is this process's own."""
    if os.geteuid() != 0:
        return None
    info = os.stat(folder)
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
