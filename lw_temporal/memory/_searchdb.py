"""The search index of one store: its files' chunks in SQLite FTS5, kept by the commit.

The index is derived data; the store's files and journal are the truth. It lives in
the store's bookkeeping (``search/``), one SQLite file per *generation*
(``index-<id>.db``) named by the ``current`` pointer. A rebuild fills a new generation
and moves the pointer, so no reader sees a half-built index and no rollback journal
left by a crashed writer can ever be applied to another file than its own.

How it stays right:

- **The commit keeps it.** After a batch is applied, and before the journal is marked
  applied, the batch's paths are brought along in one SQLite transaction
  (:meth:`SearchIndex.follow`): an append re-chunks only the file's last chunk and what
  it adds; a rewrite re-inserts only the chunks whose text changed; a delete drops the
  file's rows. A commit never builds an index: a store that was never searched has none.
- **A staleness check.** The index records the store's tree id (the hash of all its
  files' paths and sha256s, kept in the usage record) it was last in step with
  (``synced``). A commit moves it on only if it was in step before the batch. A crash
  between the journal and the index, an update that failed, a new boot (whose first
  user runs SQLite's checks on the file once) or a ``recount`` after hand edits all
  leave it behind the store's tree, and the next search repairs it under the store's
  lock, re-reading only the files whose sha256 differs.
- **Nothing redacted stays.** SQLite's ``secure_delete`` (``FAST``: within pages, no
  extra writes) zeroes what is deleted, and :meth:`SearchIndex.scrub` (after a
  redaction) merges FTS5's segments (which keep a
  deleted row's terms until merged), drops vectors no chunk has, and copies the index
  into a new generation (``VACUUM INTO``), so no old page survives in any index file.

Writes are not flushed (``synchronous=OFF``: what a crash loses is repaired as above).
The rollback journal (not WAL) is used because WAL needs shared memory, which a memory
root on NFS does not give; readers block a commit only for the length of one query.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from . import _fs
from ._index import FileIndex
from ._journal import boot_id
from ._searchrows import follow_path, put, remove

_log = logging.getLogger(__name__)

#: Format of the index files; another one is rebuilt.
FORMAT = "1"
_NAME = re.compile(r"index-[0-9a-f]{32}\.db")
_BUSY_SECONDS = 10.0
#: Changed files a repair writes per SQLite transaction (readers wait at most this long).
_REPAIR_BATCH = 256

_SCHEMA = """
CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE files(path TEXT PRIMARY KEY, sha TEXT NOT NULL, size INTEGER NOT NULL,
                   binary INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, line INTEGER NOT NULL,
                    start INTEGER NOT NULL, sha TEXT NOT NULL);
CREATE INDEX chunks_by_path ON chunks(path, start);
CREATE VIRTUAL TABLE body USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE vectors(sha TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL,
                     PRIMARY KEY (sha, model));
"""


@cache
def fts5_available() -> bool:
    """Whether this Python's SQLite has FTS5 (``ENABLE_FTS5``; CPython's builds do)."""
    try:
        conn = sqlite3.connect(":memory:")
        try:
            conn.execute("CREATE VIRTUAL TABLE probe USING fts5(x)")
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return True


_local = threading.local()
_checked: set[tuple[str, str]] = set()


def _connections() -> dict[tuple[int, str], sqlite3.Connection]:
    found: dict[tuple[int, str], sqlite3.Connection] | None = getattr(_local, "conns", None)
    if found is None:
        found = _local.conns = {}
    return found


def _open(path: Path, *, create: bool = False) -> sqlite3.Connection:
    mode = "rwc" if create else "rw"
    conn = sqlite3.connect(
        f"{path.as_uri()}?mode={mode}", uri=True, timeout=_BUSY_SECONDS, isolation_level=None
    )
    try:
        conn.execute("PRAGMA journal_mode=TRUNCATE")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA secure_delete=FAST")  # zero what a delete frees in a page
        conn.execute("PRAGMA cache_size=-4096")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction (taken at once, so two writers queue instead of failing
    on an upgrade from read to write)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(k, v) VALUES(?, ?)", (key, value))


@dataclass(frozen=True, slots=True)
class _Path:
    """What the ops of one applied batch did to one path, in order."""

    ops: list[dict[str, Any]]


class SearchIndex:
    """The search index files of one store (under its state dir)."""

    def __init__(self, state: Path) -> None:
        self.dir = state / "search"
        self.pointer = self.dir / "current"
        self.checked_file = self.dir / "checked"

    # -- generations ------------------------------------------------------------------
    def current(self) -> Path | None:
        """The current generation's file, or ``None`` when the store has no index."""
        try:  # asked by every commit: plain calls
            fd = os.open(self.pointer, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            name = os.read(fd, 256).decode("utf-8", "replace").strip()
        finally:
            os.close(fd)
        if not _NAME.fullmatch(name) or not (self.dir / name).is_file():
            return None
        return self.dir / name

    def exists(self) -> bool:
        return self.current() is not None

    def connect(self, path: Path) -> sqlite3.Connection:
        """This thread's connection to ``path`` (one per thread and process: a
        connection is never shared across a fork or between threads)."""
        conns = _connections()
        key = (os.getpid(), str(path))
        conn = conns.get(key)
        if conn is None:
            for old in [k for k in conns if k[1].startswith(str(self.dir) + os.sep)]:
                conns.pop(old).close()  # an earlier generation's
            conn = conns[key] = _open(path)
        return conn

    def forget_connections(self) -> None:
        conns = _connections()
        for key in [k for k in conns if k[1].startswith(str(self.dir) + os.sep)]:
            conns.pop(key).close()

    def checked(self, path: Path) -> bool:
        """Whether the file passed SQLite's checks in this boot (after a power loss
        unflushed pages may be torn: the first user in a new boot checks)."""
        key = (boot_id(), str(path))
        if key in _checked:
            return True
        try:
            if self.checked_file.read_text().split() == [boot_id(), path.name]:
                _checked.add(key)
                return True
        except OSError:
            pass
        return False

    def check(self, path: Path) -> bool:
        """Run SQLite's and FTS5's own checks on ``path`` (call under the store's
        lock); remembered for this boot when they pass."""
        try:
            conn = self.connect(path)
            ok = bool(conn.execute("PRAGMA quick_check").fetchone()[0] == "ok")
            if ok and meta(conn, "format") == FORMAT:
                conn.execute("INSERT INTO body(body) VALUES('integrity-check')")
            else:
                ok = False
        except sqlite3.Error:
            ok = False
        if ok:
            _fs.write_atomic(self.checked_file, f"{boot_id()} {path.name}\n".encode())
            _checked.add((boot_id(), str(path)))
        return ok

    def create(self) -> tuple[Path, sqlite3.Connection]:
        """A new, empty generation (not current until :meth:`switch`)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"index-{uuid.uuid4().hex}.db"
        conn = _open(path, create=True)
        conn.executescript(_SCHEMA)
        _set_meta(conn, "format", FORMAT)
        conn.close()
        return path, self.connect(path)

    def switch(self, path: Path) -> None:
        """Make ``path`` current and remove every other index file (call under the
        store's lock)."""
        _fs.fsync_path(path)  # a new file: no connection holds a lock on it yet
        _fs.write_atomic(self.pointer, f"{path.name}\n".encode())
        _fs.write_atomic(self.checked_file, f"{boot_id()} {path.name}\n".encode())
        _checked.add((boot_id(), str(path)))
        self._remove_except(path.name)

    def drop(self) -> None:
        """Remove the index entirely (call under the store's lock): the next search
        rebuilds it from the files. Also the entry point of ``forget``."""
        self.forget_connections()
        with suppress(FileNotFoundError):
            self.pointer.unlink()
        self._remove_except(None)

    def _remove_except(self, keep: str | None) -> None:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        for name in names:
            if name.startswith("index-") and (keep is None or not name.startswith(keep)):
                with suppress(FileNotFoundError):
                    os.unlink(self.dir / name)

    def flush(self) -> None:
        """Put the index file on disk (at a store's checkpoint). Through SQLite, not by
        opening the file: closing any other descriptor of it would drop the locks this
        process's connections hold on it."""
        path = self.current()
        if path is None:
            return
        try:
            conn = self.connect(path)
            conn.execute("PRAGMA synchronous=FULL")
            try:
                with write(conn):
                    conn.execute("UPDATE meta SET v = v WHERE k = 'format'")
            finally:
                conn.execute("PRAGMA synchronous=OFF")
        except sqlite3.Error as err:
            _log.warning("search index of %s not flushed: %s", self.dir, err)

    def disk_bytes(self) -> int:
        """Bytes of every file of the index (counted toward the store's quota)."""
        total = 0
        try:
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    with suppress(OSError):
                        total += entry.stat(follow_symlinks=False).st_size
        except (FileNotFoundError, NotADirectoryError):
            return 0
        return total

    # -- the commit -----------------------------------------------------------------
    def follow(
        self,
        root_fd: int | None,
        record: Mapping[str, Any],
        contents: Mapping[str, bytes],
        start_tree: str,
    ) -> None:
        """Bring the index along with one applied batch (under the store's lock, before
        the journal is marked applied). Never raises: a failed update leaves the index
        behind the store's tree, and the next search repairs it."""
        path = self.current()
        if path is None or root_fd is None:
            return
        paths: dict[str, _Path] = {}
        for commit in record["commits"]:
            for op in commit["ops"]:
                if op["k"] in ("a", "w", "s", "d"):
                    paths.setdefault(op["p"], _Path([])).ops.append(op)
        if not paths:
            return  # no file changed (a policy, a prune): nor did the tree
        try:
            if not self.checked(path):
                return  # left behind: the next search checks and repairs it
            conn = self.connect(path)
            with write(conn):
                fresh = meta(conn, "synced") == start_tree
                for rel, changed in paths.items():
                    follow_path(conn, root_fd, rel, changed.ops, contents)
                if fresh:
                    _set_meta(conn, "synced", str(record["usage"]["tree"]))
        except sqlite3.OperationalError as err:  # busy past the timeout, disk full
            _log.warning("search index of %s not updated (repaired later): %s", self.dir, err)
        except sqlite3.DatabaseError as err:  # a damaged file: rebuilt by the next search
            _log.warning("search index of %s is damaged, dropped: %s", self.dir, err)
            self.drop()
        except (OSError, ValueError) as err:
            _log.warning("search index of %s not updated (repaired later): %s", self.dir, err)

    # -- repair -----------------------------------------------------------------------
    def sync_all(
        self,
        conn: sqlite3.Connection,
        root_fd: int | None,
        index: FileIndex,
        tree: str,
        cancel: Callable[[], None],
    ) -> int:
        """Make the index match the store's files (call under the store's lock): only
        files whose sha256 differs from the indexed one are read again. Returns how
        many files were (re)indexed."""
        known = dict(conn.execute("SELECT path, sha FROM files").fetchall())
        seen: set[str] = set()
        changed = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for rel, kind, _size in [] if root_fd is None else _fs.walk_files(root_fd, ""):
                if kind != "file" or not _indexable(rel) or root_fd is None:
                    continue
                seen.add(rel)
                parts = tuple(rel.split("/"))
                with _fs.opened_dir(root_fd, parts[:-1], create=False, shown=rel) as fd:
                    if fd is None:
                        continue
                    state, content = index.lookup(fd, parts[-1], rel, rel)
                    if state is None or known.get(rel) == state.sha:
                        continue
                    if content is None:
                        content = _fs.read_at(fd, parts[-1], rel)
                if content is None:
                    continue
                put(conn, rel, state.sha, content)
                changed += 1
                if changed % _REPAIR_BATCH == 0:
                    conn.execute("COMMIT")
                    cancel()
                    conn.execute("BEGIN IMMEDIATE")
            for rel in set(known) - seen:
                remove(conn, rel)
            _set_meta(conn, "synced", tree)
        except BaseException:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return changed

    def scrub(self, path: Path) -> Path:
        """Leave no deleted text in any index file (call under the store's lock):
        merge every FTS5 segment (dropping deleted rows' terms), drop vectors no
        chunk has, copy what is live into a new generation and remove the old one."""
        conn = self.connect(path)
        with write(conn):
            conn.execute("INSERT INTO body(body) VALUES('optimize')")
            conn.execute("DELETE FROM vectors WHERE sha NOT IN (SELECT sha FROM chunks)")
        fresh = self.dir / f"index-{uuid.uuid4().hex}.db"
        conn.execute("VACUUM INTO ?", (str(fresh),))
        self.forget_connections()
        self.switch(fresh)
        return fresh


def keep_vectors(conn: sqlite3.Connection, old: Path) -> None:
    """Copy the vectors of an earlier generation into a new one (they were paid for);
    none from one that cannot be read."""
    try:
        conn.execute("ATTACH DATABASE ? AS old", (str(old),))
    except sqlite3.Error:
        return
    try:
        conn.execute("INSERT OR IGNORE INTO vectors SELECT sha, model, vec FROM old.vectors")
    except sqlite3.Error:
        pass
    finally:
        conn.execute("DETACH DATABASE old")


def _indexable(rel: str) -> bool:
    """A name memory can hold (a file planted with another is not searched)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not _fs.CONTROL.search(rel) and not any(
        p.startswith(_fs.TMP_PREFIX) for p in rel.split("/")
    )
