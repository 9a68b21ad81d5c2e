"""Kept versions of a store's files, stored as reverse deltas on the live file.

The current version of a file is the file itself; nothing is copied to keep it. When a
change supersedes a version, that version is kept as the difference from its successor:

- an append keeps the old version as *a prefix of* the new one (a few bytes of JSON);
- an edit in place (``str_replace``, ``sed -i``) keeps the old bytes of the changed
  region (*a splice* of the new one);
- a rewrite or a delete keeps the old file itself, hard-linked into the version store
  before the live name is replaced (no copy).

So every change costs disk in proportion to what it changed, and reading the current
file never follows a chain. Reverse deltas (RCS's choice) beat forward deltas here
because the hot path, reading and appending to the newest version, touches no version
data at all; reading an old version walks its chain toward the newest (rare: restore,
redaction, review).

Objects are addressed by the sha256 of the content they stand for:
``versions/<sha>`` holds a whole content; a reference (``live`` path, ``prefix`` of /
``splice`` of another version) is a record of the store's ``versions.log`` (see
:mod:`._logfile`: one log, not a file per version, so a reference costs its hundred
bytes and not a disk block). A redaction gives a cleaned version a new address and
leaves a redirect from the old one, so the append-only audit log stays resolvable, and
compacts the log so the references it dropped leave the disk. The store is written
without fsync: the journal holds everything needed to redo it, and a checkpoint
flushes it.

Stores written before the log kept each reference in ``versions/<sha>.json``;
:meth:`VersionStore.migrate` moves them into the log (the first lock of the store
does it), and until then they are read where they are.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _fs
from ._logfile import KeyedLog, line_bytes
from ._records import AuditEntry, VersionInfo

#: Longest reference chain followed when reading one version (a guard, not a limit
#: anyone meets: retention keeps chains far shorter).
MAX_CHAIN = 100_000

#: Reads a store file's current content if its sha256 is the one given (else ``None``).
LiveReader = Callable[[str, str], "bytes | None"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


@dataclass(frozen=True, slots=True)
class Splice:
    """``new = old[:offset] + inserted + old[offset + len(removed):]``: the one
    region that differs between two contents, found from their common prefix and
    suffix."""

    offset: int
    removed: bytes
    inserted: bytes

    @classmethod
    def between(cls, old: bytes, new: bytes) -> Splice:
        limit = min(len(old), len(new))
        start = _common(old, new, limit, from_end=False)
        end = _common(old, new, limit - start, from_end=True)
        return cls(start, old[start : len(old) - end], new[start : len(new) - end])

    @property
    def changed(self) -> int:
        return len(self.removed) + len(self.inserted)


def _common(a: bytes, b: bytes, limit: int, *, from_end: bool) -> int:
    """Length of the common prefix (or suffix) of ``a`` and ``b``, at most ``limit``,
    compared in halving steps so a long equal run costs a few slice compares."""
    n, step = 0, 1 << 16
    la, lb = len(a), len(b)
    while step:
        while n + step <= limit and (
            a[la - n - step : la - n] == b[lb - n - step : lb - n]
            if from_end
            else a[n : n + step] == b[n : n + step]
        ):
            n += step
        step //= 2
    return n


def live_ref(rel: str) -> dict[str, Any]:
    """The reference that finds the current version in the store file ``rel``."""
    return {"live": rel}


def prefix_ref(of: str, length: int) -> dict[str, Any]:
    """The reference that keeps a version as the first ``length`` bytes of ``of``."""
    return {"prefix": of, "len": length}


def splice_ref(of: str, splice: Splice) -> dict[str, Any]:
    """The reference that keeps a version as ``of`` with ``splice`` undone."""
    return {
        "splice": of, "at": splice.offset, "cut": len(splice.inserted),
        "data": b64(splice.removed),
    }  # fmt: skip


def ref_bytes(sha: str, ref: dict[str, Any]) -> int:
    """What keeping ``sha`` by ``ref`` adds to the store's versions (its record in the
    versions log, counted as written: the quota counts what is on disk)."""
    return line_bytes(sha, ref)


class VersionStore:
    """The version objects of one store (under its bookkeeping dir)."""

    def __init__(self, state: Path) -> None:
        self.dir = state / "versions"
        self._at = f"{self.dir}/"  # names joined as text on the per-change path
        self.log = KeyedLog(state / "versions.log")
        self._redirects = state / "redirects"
        self._legacy = state / "blobs"

    # -- addresses -----------------------------------------------------------------
    def _full(self, sha: str) -> Path:
        return self.dir / sha

    def _has_full(self, sha: str) -> bool:
        return os.path.exists(self._at + sha)

    def _old_ref(self, sha: str) -> Path:
        return self.dir / f"{sha}.json"

    def resolve(self, sha: str) -> str:
        """Follow redaction redirects to the address that holds the content now."""
        for _ in range(16):
            try:
                sha = (self._redirects / sha).read_text().strip()
            except FileNotFoundError:
                return sha
        return sha

    def redirect(self, old: str, new: str) -> None:
        _fs.write_redoable(self._redirects / old, new.encode())

    def written_paths(self, sha: str) -> list[Path]:
        found = [self._full(sha)] if self._has_full(sha) else []
        return [*found, self.log.path] if os.path.exists(self.log.path) else found

    # -- writing -------------------------------------------------------------------
    def _put_ref(self, sha: str, ref: dict[str, Any]) -> None:
        # only for a version with no whole copy (each caller looked, under the lock)
        self.log.put([(sha, ref)])

    def _drop_ref(self, sha: str) -> None:
        self.log.drop([sha])
        with suppress(FileNotFoundError):
            self._old_ref(sha).unlink()

    def put_live(self, sha: str, rel: str) -> None:
        """``sha`` is the current content of the store file ``rel``. A whole copy
        already kept stays (it costs nothing more and survives the live file)."""
        if not self._has_full(sha):
            self._put_ref(sha, live_ref(rel))

    def put_prefix(self, sha: str, of: str, length: int) -> None:
        if not self._has_full(sha):
            self._put_ref(sha, prefix_ref(of, length))

    def put_splice(self, sha: str, of: str, splice: Splice) -> None:
        """``sha``'s content is ``of``'s with ``splice`` undone (``splice`` turned
        ``sha`` into ``of``)."""
        if not self._has_full(sha):
            self._put_ref(sha, splice_ref(of, splice))

    def put_full(self, sha: str, data: bytes) -> None:
        path = self._full(sha)
        if not path.exists():
            _fs.write_atomic(path, data, sync=False)
        self._drop_ref(sha)

    def keep_file(self, sha: str, dir_fd: int, name: str) -> None:
        """Keep the file ``name`` (whose content is ``sha``) as a whole version by
        hard-linking it, so the live name can then be replaced or removed without
        copying the old bytes."""
        path = self._full(sha)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_fs.TMP_PREFIX}{sha}")
        with suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(name, tmp, src_dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            data = _fs.read_at(dir_fd, name, name)
            if data is None:
                return
            _fs.write_atomic(tmp, data, sync=False)
        os.replace(tmp, path)
        self._drop_ref(sha)

    def remove(self, sha: str) -> int:
        """Drop an object; returns the bytes it held. Its reference stays on disk
        until :meth:`compact`."""
        freed = self.log.record_bytes(sha)
        self._drop_ref(sha)
        for path in (self._full(sha), self._old_ref(sha), self._legacy / sha[:2] / sha):
            with suppress(FileNotFoundError):
                info = path.lstat()
                if info.st_nlink <= 1 or path == self._old_ref(sha):
                    freed += info.st_size
                path.unlink()
        return freed

    def compact(self) -> None:
        """Rewrite the reference log without the records it no longer needs (what a
        redaction or a prune dropped stays on disk until then)."""
        self.log.compact()

    def migrate(self) -> int:
        """Move references kept one file each (the earlier layout) into the log
        (see :meth:`KeyedLog.absorb`); returns how many moved."""
        return self.log.absorb(sorted(self.dir.glob("*.json")) if self.dir.is_dir() else [])

    # -- reading -------------------------------------------------------------------
    def ref(self, sha: str) -> dict[str, Any] | None:
        found = self.log.get(sha)
        if found is not None:
            return found
        try:  # not migrated yet
            raw = json.loads(self._old_ref(sha).read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return raw if isinstance(raw, dict) else None

    def exists(self, sha: str) -> bool:
        sha = self.resolve(sha)
        return (
            self._full(sha).exists()
            or self.ref(sha) is not None
            or (self._legacy / sha[:2] / sha).exists()
        )

    def stored_bytes(self, sha: str) -> int:
        """What keeping ``sha`` costs on disk (a reference is small, a whole copy is
        its size unless it is a hard link to a live file)."""
        total = self.log.record_bytes(sha)
        with suppress(FileNotFoundError):
            total += self._full(sha).lstat().st_size
        return total

    def get(self, sha: str, live: LiveReader) -> bytes | None:
        """A version's content (``None`` if it is no longer kept). ``live`` reads a
        store file for a version that is current somewhere."""
        steps: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        data: bytes | None = None
        want = self.resolve(sha)
        for _ in range(MAX_CHAIN):
            if want in seen:
                return None
            seen.add(want)
            try:
                data = self._full(want).read_bytes()
                break
            except FileNotFoundError:
                pass
            ref = self.ref(want)
            if ref is None:
                try:
                    data = (self._legacy / want[:2] / want).read_bytes()
                    break
                except FileNotFoundError:
                    return None
            if "live" in ref:
                data = live(str(ref["live"]), want)
                if data is None:
                    return None
                break
            steps.append((want, ref))
            want = self.resolve(str(ref.get("prefix") or ref.get("splice")))
        else:
            return None
        for _sha, ref in reversed(steps):
            if "prefix" in ref:
                data = data[: int(ref["len"])]
            else:
                at, cut = int(ref["at"]), int(ref["cut"])
                data = data[:at] + unb64(str(ref["data"])) + data[at + cut :]
        return data

    def total_bytes(self) -> int:
        """Whole copies and live references: what the store's versions hold."""
        total = self.log.live_bytes()
        if self.dir.is_dir():
            for path in self.dir.iterdir():
                with suppress(FileNotFoundError):
                    info = path.lstat()
                    if stat.S_ISREG(info.st_mode) and not path.name.startswith(_fs.TMP_PREFIX):
                        total += info.st_size
        return total

    def dependents(self, shas: Iterable[str]) -> dict[str, str]:
        """Objects whose reference points at one of ``shas``: {dependent: target}."""
        wanted = set(shas)
        found: dict[str, str] = {}
        for sha, ref in self.log.items():
            target = ref.get("prefix") or ref.get("splice")
            if isinstance(target, str) and self.resolve(target) in wanted:
                found[sha] = target
        return found


def history(
    versions: VersionStore, entries: Iterable[AuditEntry], live: LiveReader
) -> list[VersionInfo]:
    """The versions one file went through, oldest first, from its audit lines: each
    with whether it is still kept (a redacted one under its clean address)."""
    seen: dict[str, VersionInfo] = {}
    for entry in entries:
        for sha, op, size in (
            (entry.sha256_before, "earlier", None),
            (entry.sha256_after, entry.op, entry.bytes),
        ):
            if sha is None:
                continue
            resolved = versions.resolve(sha)
            if resolved in seen:
                continue
            available = versions.exists(resolved)
            if size is None or resolved != sha:
                data = versions.get(resolved, live) if available else None
                available = data is not None
                size = len(data) if data is not None else 0
            seen[resolved] = VersionInfo(
                sha256=resolved,
                bytes=size,
                time=entry.time,
                op=op,
                workflow_id=entry.workflow_id,
                actor=entry.actor,
                available=available,
                tainted=entry.tainted,
            )
    return list(seen.values())
