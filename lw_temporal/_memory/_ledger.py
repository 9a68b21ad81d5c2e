"""A store's audit log and its idempotency ledger.

The audit log (``audit.jsonl``) is append-only, one JSON line per changed file. The
ledger keeps, per activity (namespace, workflow id, run id, activity id), what its
committed mutation returned, so a retry returns that instead of acting again. Both are
written after the journal made the change durable and without fsync of their own: the
journal can write them again, and a checkpoint flushes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from . import _fs
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
        self.dir = state / "ledger"

    def get(self, key: Key) -> LedgerRecord | None:
        return self.get_hashed(key_hash(key))

    def get_hashed(self, hashed: str) -> LedgerRecord | None:
        try:
            raw = json.loads((self.dir / f"{hashed}.json").read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return LedgerRecord(op=raw["op"], result=raw["result"], attachment=raw.get("attachment"))

    def put(self, hashed: str, op: str, result: Any, attachment: Any) -> Path:
        path = self.dir / f"{hashed}.json"
        record = {"op": op, "result": result, "attachment": attachment}
        _fs.write_redoable(path, json.dumps(record).encode())
        return path

    def prune(self, older_than: timedelta) -> int:
        cutoff = time.time() - older_than.total_seconds()
        removed = 0
        for record in self.dir.glob("*.json"):
            if record.stat().st_mtime < cutoff:
                record.unlink()
                removed += 1
        return removed
