"""An append-only log of keyed JSON records: the last record of a key wins.

The version references and the idempotency ledger were one small file per record; on
a filesystem that allocates a 4 KiB block per file, each mutation then cost two blocks
for a hundred bytes of bookkeeping. One log per store instead costs what it holds.

Writes happen under the store's lock and without fsync (the journal can write every
record again; a checkpoint flushes the log). A record is one JSON line:

- a torn last line (a crash inside the write) is cut off before the next append, and
  any line that does not parse (what a lost page cache can leave) is skipped;
- readers see a line once its newline is there, so a reader outside the lock never
  takes half a record;
- a key is dropped with a tombstone, and :meth:`KeyedLog.compact` rewrites the log
  with the live records only (atomically, flushed): after a redaction it is what
  takes the old bytes off the disk.

Each process keeps an index of where each key's last record is and reads only the
bytes appended since it last looked, so a lookup costs a ``stat`` and a ``pread``.
Every log starts with a line naming its generation (a random id written when the file
is created or compacted): an index made of another generation starts over, even when
the filesystem gave the new file the old one's inode number.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _fs

#: The field that holds a record's key, and the one that marks a tombstone.
KEY, GONE = "k", "gone"


@dataclass(slots=True)
class _Index:
    ino: int = -1
    head: bytes = b""
    end: int = 0
    #: key -> (offset, length) of its last record.
    at: dict[str, tuple[int, int]] = field(default_factory=dict)
    dead: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


_indexes: dict[Path, _Index] = {}
_indexes_lock = threading.Lock()


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def line_bytes(key: str, body: dict[str, Any]) -> int:
    """The bytes the record of ``key`` takes in its log as :meth:`KeyedLog.live_bytes`
    counts them (its newline aside)."""
    return len(_line({KEY: key, **body})) - 1


def _header() -> bytes:
    return _line({KEY: "", "gen": uuid.uuid4().hex})


class KeyedLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    # -- writing (under the store's lock) --------------------------------------------
    def put(self, records: Iterable[tuple[str, dict[str, Any]]]) -> None:
        lines = b"".join(_line({KEY: key, **body}) for key, body in records)
        held: list[bytes] | None = getattr(self._local, "held", None)
        if held is not None:
            held.append(lines)
        else:
            self._append(lines)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """This thread's records put inside are appended together when it ends (or
        before this thread next reads the log): one write for a batch's records."""
        self._local.held = []
        try:
            yield
        finally:
            self._release()
            self._local.held = None

    def _release(self) -> None:
        held: list[bytes] | None = getattr(self._local, "held", None)
        if held:
            lines = b"".join(held)
            held.clear()
            self._append(lines)

    def drop(self, keys: Iterable[str]) -> None:
        """Tombstone the keys the log holds (a key it never held costs nothing)."""
        index = self._refresh()
        self._append(b"".join(_line({KEY: k, GONE: 1}) for k in keys if k in index.at))

    def _append(self, lines: bytes) -> None:
        if not lines:
            return
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                lines = _header() + lines
            elif os.pread(fd, 1, size - 1) != b"\n":
                lines = b"\n" + lines  # end a torn line: it stays unreadable, not ours
            view = memoryview(lines)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def compact(self, keep: Callable[[str, dict[str, Any]], bool] | None = None) -> int:
        """Rewrite the log with each key's last record (those ``keep`` accepts), flushed
        before it replaces the old one; returns how many keys were dropped."""
        records = dict(self.items())
        kept = {k: r for k, r in records.items() if keep is None or keep(k, r)}
        if len(kept) == len(records) and self._refresh().dead == 0:
            return 0  # nothing to leave behind
        data = _header() + b"".join(_line({KEY: k, **r}) for k, r in kept.items())
        _fs.write_atomic(self.path, data)
        return len(records) - len(kept)

    def absorb(self, old: list[Path], extra: Callable[[Path], dict[str, Any]] | None = None) -> int:
        """Move records kept one file each (``<key>.json``, the earlier layout) into
        the log: appended and flushed before the old files go, so a crash between the
        two leaves both (the log's copy wins: the same record). Returns how many."""
        moved: list[tuple[str, dict[str, Any]]] = []
        for path in old:
            try:
                raw = json.loads(path.read_bytes())
            except ValueError:
                continue  # an unreadable record was already treated as missing
            if isinstance(raw, dict):
                moved.append((path.stem, raw | (extra(path) if extra else {})))
        if not old:
            return 0
        self.put(moved)
        _fs.fsync_path(self.path)
        for path in old:
            path.unlink()
        return len(moved)

    # -- reading ---------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        where = self._refresh().at.get(key)
        if where is None:
            return None
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            raw = _parse(os.pread(fd, where[1], where[0]))
        finally:
            os.close(fd)
        if raw is None or raw[KEY] != key:  # compacted since the index was read
            return dict(self.items()).get(key)
        return _body(raw)

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every live key and its last record, in the order they were first written."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return iter(())
        found: dict[str, dict[str, Any] | None] = {}
        for line in data.split(b"\n"):
            raw = _parse(line)
            if raw is not None and raw[KEY]:
                found[str(raw[KEY])] = None if raw.get(GONE) else _body(raw)
        return ((k, r) for k, r in found.items() if r is not None)

    def keys(self) -> list[str]:
        return list(self._refresh().at)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def live_bytes(self) -> int:
        """What the live records take (the log's size once compacted)."""
        return sum(length for _at, length in self._refresh().at.values())

    def record_bytes(self, key: str) -> int:
        where = self._refresh().at.get(key)
        return 0 if where is None else where[1]

    def _refresh(self) -> _Index:
        self._release()
        with _indexes_lock:
            index = _indexes.setdefault(self.path, _Index())
        with index.lock:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                index.ino, index.head, index.end, index.dead = -1, b"", 0, 0
                index.at.clear()
                return index
            try:
                info = os.fstat(fd)
                if (
                    info.st_ino != index.ino
                    or info.st_size < index.end
                    or os.pread(fd, len(index.head), 0) != index.head
                ):
                    first = os.pread(fd, 128, 0)
                    cut = first.find(b"\n")
                    index.ino, index.end, index.dead = info.st_ino, 0, 0
                    index.head = first[: cut + 1] if cut >= 0 else b"\0"
                    index.at.clear()
                if info.st_size > index.end:
                    data = os.pread(fd, info.st_size - index.end, index.end)
                    index.end += _scan(data, index.end, index)
            finally:
                os.close(fd)
            return index


def _scan(data: bytes, base: int, index: _Index) -> int:
    """Index the complete lines of ``data`` (read at ``base``); returns how many bytes
    they take (a line without its newline yet is left for next time)."""
    at = 0
    while (end := data.find(b"\n", at)) >= 0:
        raw = _parse(data[at:end])
        if raw is not None and raw[KEY]:
            key = str(raw[KEY])
            if key in index.at:
                index.dead += 1
            if raw.get(GONE):
                index.at.pop(key, None)
            else:
                index.at[key] = (base + at, end - at)
        at = end + 1
    return at


def _parse(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    return raw if isinstance(raw, dict) and isinstance(raw.get(KEY), str) else None


def _body(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != KEY}
