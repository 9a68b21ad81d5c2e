"""What a store holds now, known without reading its files.

The *current-version index* keeps, per file, the sha256 of its content, its size and
the resumable SHA-256 state after its last byte, checked against the file's inode,
size and timestamps. An append then costs what it appends: the precondition, the audit
line and the new ``content_sha256`` come from the index and the new bytes, never from
re-reading the file. An entry whose file changed behind the store's back (an operator
edited it by hand) no longer matches and is rebuilt from the file, so the index is a
cache: it is written without fsync and never trusted blindly.

The *usage* record keeps the counters the quota and the run manifests need: bytes of
current files and of kept versions, files and folders, and the store's *tree id*, a
hash of the set of (path, content sha256) pairs maintained incrementally (a sum of
per-file hashes modulo 2**256), so the snapshot id of a store costs one small read.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path

import resumablesha256

from . import _fs

_MOD = 1 << 256


def _key(rel: str) -> str:
    return hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()


def tree_term(rel: str, sha: str) -> int:
    """One file's contribution to the tree id."""
    digest = hashlib.sha256(f"{rel}\0{sha}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest, "big")


def tree_id(value: int) -> str:
    return f"{value % _MOD:064x}"


@dataclass(frozen=True, slots=True)
class FileState:
    """The current version of one file. ``hstate`` is the SHA-256 state after its
    content (``None`` until an append needs it)."""

    sha: str
    size: int
    hstate: bytes | None = None

    def extended(self, data: bytes) -> FileState:
        """This file with ``data`` appended, hashed from the saved state only."""
        assert self.hstate is not None
        hasher = resumablesha256.sha256()
        hasher.__setstate__(self.hstate)
        hasher.update(data)
        return FileState(hasher.hexdigest(), self.size + len(data), hasher.__getstate__())


def state_of(content: bytes, *, resumable: bool = False) -> FileState:
    """The :class:`FileState` of ``content`` (with its resumable state if asked)."""
    if not resumable:
        return FileState(hashlib.sha256(content).hexdigest(), len(content))
    hasher = resumablesha256.sha256()
    hasher.update(content)
    return FileState(hasher.hexdigest(), len(content), hasher.__getstate__())


@dataclass(slots=True)
class Usage:
    """What a store holds: current files' bytes, kept versions' bytes, files,
    folders, the tree id's running sum, its search index's bytes and its records'
    bytes (the last two measured when a batch starts, not journaled)."""

    live: int = 0
    versions: int = 0
    files: int = 0
    dirs: int = 0
    tree: int = 0
    #: The search index's bytes (once a search made one).
    index: int = 0
    #: The store's own records (audit, journal, ledger): measured from their files
    #: when a batch starts (:meth:`StoreFiles.bookkeeping_bytes`), never stored.
    bookkeeping: int = 0

    @property
    def bytes(self) -> int:
        """What the byte quota counts: current files, kept versions, the search index
        and the store's own records."""
        return self.live + self.versions + self.index + self.bookkeeping

    @property
    def entries(self) -> int:
        return self.files + self.dirs

    def as_json(self) -> dict[str, int | str]:
        return {
            "live": self.live, "versions": self.versions, "files": self.files,
            "dirs": self.dirs, "tree": tree_id(self.tree),
        }  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, object]) -> Usage:
        return cls(
            live=int(str(raw["live"])),
            versions=int(str(raw.get("versions", 0))),
            files=int(str(raw["files"])),
            dirs=int(str(raw.get("dirs", 0))),
            tree=int(str(raw["tree"]), 16),
        )

    def copy(self) -> Usage:
        return replace(self)


class FileIndex:
    """The current-version index and usage record of one store."""

    def __init__(self, state: Path) -> None:
        self.dir = state / "index"
        self.usage_path = state / "usage.json"
        #: Entries this process read or wrote, by path, with the file identity they
        #: hold for: one that still matches the file is the entry, unread.
        self._seen: dict[str, tuple[tuple[int, int, int, int], FileState]] = {}

    def _entry(self, rel: str) -> Path:
        return self.dir / f"{_key(rel)}.json"

    def lookup(
        self, dir_fd: int, name: str, rel: str, shown: str, *, resumable: bool = False
    ) -> tuple[FileState | None, bytes | None]:
        """The file's state, and its content when it had to be read to know it.
        ``(None, None)`` if absent; links and non-files are refused by the read."""
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None, None
        if stat.S_ISREG(info.st_mode):
            cached = self._cached(rel, info)
            if cached is not None and (cached.hstate is not None or not resumable):
                return cached, None
        content = _fs.read_at(dir_fd, name, shown)
        if content is None:
            return None, None
        found = state_of(content, resumable=resumable)
        self.remember(dir_fd, name, rel, found)
        return found, content

    def known(self, rel: str, info: os.stat_result) -> FileState | None:
        """The indexed state of ``rel`` if it still matches the file ``info`` is of."""
        return self._cached(rel, info) if stat.S_ISREG(info.st_mode) else None

    def _cached(self, rel: str, info: os.stat_result) -> FileState | None:
        ident = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        seen = self._seen.get(rel)
        if seen is not None and seen[0] == ident:
            return seen[1]
        try:
            raw = json.loads(self._entry(rel).read_bytes())
            if (
                raw["path"] == rel
                and raw["ino"] == info.st_ino
                and raw["size"] == info.st_size
                and raw["mtime"] == info.st_mtime_ns
                and raw["ctime"] == info.st_ctime_ns
            ):
                h = raw.get("h")
                found = FileState(
                    str(raw["sha"]), int(raw["size"]), bytes.fromhex(h) if h else None
                )
                self._see(rel, ident, found)
                return found
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return None

    def _see(self, rel: str, ident: tuple[int, int, int, int], found: FileState) -> None:
        if len(self._seen) >= 4096:
            self._seen.clear()
        self._seen[rel] = (ident, found)

    def remember(
        self,
        dir_fd: int,
        name: str,
        rel: str,
        found: FileState,
        info: os.stat_result | None = None,
    ) -> None:
        """Record ``found`` as the state of the file now at ``name`` (or of the one
        ``info``, taken from the fd that was read, describes)."""
        if info is None:
            try:
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return
        if info.st_size != found.size:
            return
        entry = {
            "path": rel,
            "sha": found.sha,
            "size": found.size,
            "ino": info.st_ino,
            "mtime": info.st_mtime_ns,
            "ctime": info.st_ctime_ns,
            "h": found.hstate.hex() if found.hstate else None,
        }
        path = self._entry(rel)
        _fs.write_redoable(path, json.dumps(entry).encode())
        self._see(rel, (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns), found)

    def forget(self, rel: str) -> None:
        self._seen.pop(rel, None)
        with suppress(FileNotFoundError):
            self._entry(rel).unlink()

    # -- usage --------------------------------------------------------------------
    def read_usage(self) -> Usage | None:
        for _attempt in range(2):  # a read racing an in-place rewrite: once more
            try:
                fd = os.open(self.usage_path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    data = _fs.read_fd(fd)
                finally:
                    os.close(fd)
                return Usage.from_json(json.loads(data))
            except FileNotFoundError:
                return None
            except (ValueError, KeyError, TypeError):
                continue
        return None

    def write_usage(self, usage: Usage, *, sync: bool = False) -> None:
        data = json.dumps(usage.as_json()).encode()
        if sync:
            _fs.write_atomic(self.usage_path, data)
        else:
            _fs.write_redoable(self.usage_path, data)
