"""A store's audit log and its idempotency ledger.

The audit log (``audit.jsonl``) is append-only, one JSON line per changed file. The
ledger (``ledger.log``, a :class:`._logfile.KeyedLog`) keeps, per activity (namespace,
workflow id, run id, activity id), what its committed mutation returned, so a retry
returns that instead of acting again. Both are written after the journal made the
change durable and without fsync of their own: the journal can write them again, and a
checkpoint flushes them.

Stores written before the ledger was a log kept one ``ledger/<key>.json`` per record;
:meth:`Ledger.migrate` moves them into the log (the first lock of the store does it),
and until then a record is also looked for where it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from contextlib import suppress
from datetime import timedelta
from pathlib import Path
from typing import Any

from ._logfile import KeyedLog
from ._records import AuditEntry, LedgerRecord

Key = tuple[str, str, str, str]


def key_hash(key: Key) -> str:
    return hashlib.sha256("\0".join(key).encode()).hexdigest()


class AuditLog:
    def __init__(self, state: Path) -> None:
        self.path = state / "audit.jsonl"

    def append(self, entries: Iterable[dict[str, Any]]) -> None:
        lines = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)
        if not lines:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, lines)
        finally:
            os.close(fd)

    def has(self, op_id: str) -> bool:
        """Whether ``op_id``'s lines are already in the log (its recent end)."""
        try:
            with self.path.open("rb") as f:
                f.seek(max(0, self.path.stat().st_size - (4 << 20)))
                return f'"op_id":"{op_id}"'.encode() in f.read()
        except FileNotFoundError:
            return False

    def read(self, *, path: str | None = None) -> list[AuditEntry]:
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        entries = [AuditEntry.model_validate_json(line) for line in lines if line.strip()]
        return entries if path is None else [e for e in entries if e.path == path]

    def read_since(self, offset: int) -> tuple[list[tuple[int, AuditEntry]], int]:
        """The entries after byte ``offset``, each with the offset its line starts at,
        and the offset to read from next time (a line still being appended waits)."""
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        entries: list[tuple[int, AuditEntry]] = []
        at = 0
        while (end := data.find(b"\n", at)) >= 0:
            if data[at:end].strip():
                entries.append((offset + at, AuditEntry.model_validate_json(data[at:end])))
            at = end + 1
        return entries, offset + at


class Ledger:
    def __init__(self, state: Path) -> None:
        self.log = KeyedLog(state / "ledger.log")
        self._old = state / "ledger"
        self._old_prefix = f"{self._old}/"

    @property
    def path(self) -> Path:
        return self.log.path

    def get(self, key: Key) -> LedgerRecord | None:
        return self.get_hashed(key_hash(key))

    def get_hashed(self, hashed: str) -> LedgerRecord | None:
        raw = self.log.get(hashed)
        if raw is None:
            try:  # not migrated yet (looked up by name: this runs on every mutation)
                fd = os.open(f"{self._old_prefix}{hashed}.json", os.O_RDONLY | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                return None
            try:
                raw = json.loads(os.read(fd, 1 << 24))
            except ValueError:
                return None
            finally:
                os.close(fd)
        return LedgerRecord(op=raw["op"], result=raw["result"], attachment=raw.get("attachment"))

    def put(self, hashed: str, op: str, result: Any, attachment: Any) -> None:
        record = {"op": op, "result": result, "attachment": attachment, "t": int(time.time())}
        self.log.put([(hashed, record)])

    def prune(self, older_than: timedelta) -> int:
        cutoff = time.time() - older_than.total_seconds()
        return self.log.compact(lambda _key, record: float(record.get("t", 0)) >= cutoff)

    def migrate(self) -> int:
        """Move the one-file-per-record ledger of the earlier layout into the log
        (flushed before the old files go); returns how many records moved."""
        if not self._old.is_dir():
            return 0
        moved = self.log.absorb(
            sorted(self._old.glob("*.json")), lambda path: {"t": int(path.stat().st_mtime)}
        )
        with suppress(OSError):
            self._old.rmdir()
        return moved
