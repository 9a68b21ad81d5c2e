"""Retention of kept versions: a policy per store, applied as one audited mutation.

The policy (:class:`VersionRetention`, default: the last 20 of each file) is kept in
the store's bookkeeping and set by an operator (``lw-temporal memory retention``);
the scheduled retention pass and ``lw-temporal memory prune`` apply it. A version is
kept if it is among the last ``keep_last`` of its file, younger than ``keep_days``, or
current; and so is every version a kept one refers to (a reverse delta needs its
newer version to be read). Each file that lost versions gets an audit line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ._records import AuditEntry, PruneResult, VersionRetention
from ._txn import StoreFiles, Txn


def policy_path(state: Path) -> Path:
    return state / "retention.json"


def read_policy(state: Path) -> VersionRetention:
    try:
        return VersionRetention.model_validate_json(policy_path(state).read_bytes())
    except (FileNotFoundError, ValueError):
        return VersionRetention()


def policy_body(policy: VersionRetention) -> Callable[[Txn], VersionRetention]:
    def body(txn: Txn) -> VersionRetention:
        txn.ops.append({"k": "p", "policy": policy.model_dump(mode="json")})
        txn.record("retention", "", 0, None, None, detail=_detail(policy))
        return policy

    return body


def _detail(policy: VersionRetention) -> dict[str, str]:
    detail = {"keep_last": str(policy.keep_last)}
    if policy.keep_days is not None:
        detail["keep_days"] = str(policy.keep_days)
    return detail


def prune_body(
    files: StoreFiles,
    entries: list[AuditEntry],
    policy: VersionRetention,
    now: datetime | None = None,
) -> Callable[[Txn], PruneResult]:
    versions = files.versions
    cutoff = None
    if policy.keep_days is not None:
        cutoff = (now or datetime.now(UTC)) - timedelta(days=policy.keep_days)

    def body(txn: Txn) -> PruneResult:
        history: dict[str, dict[str, datetime]] = {}
        current: dict[str, str | None] = {}
        for entry in entries:
            if not entry.path:
                continue
            shas = history.setdefault(entry.path, {})
            when = datetime.fromisoformat(entry.time)
            for sha in (entry.sha256_before, entry.sha256_after):
                if sha is not None:
                    resolved = versions.resolve(sha)
                    shas.pop(resolved, None)
                    shas[resolved] = when  # most recent last
            if entry.op not in ("mkdir", "rmdir"):  # folders have no versions
                after = entry.sha256_after
                current[entry.path] = None if after is None else versions.resolve(after)
        keep: set[str] = {sha for sha in current.values() if sha is not None}
        for shas in history.values():
            ordered = list(shas)
            keep.update(ordered[-policy.keep_last :])
            if cutoff is not None:
                keep.update(s for s, when in shas.items() if when >= cutoff)
        keep = _closure(files, keep)
        removed = freed = 0
        touched = 0
        for path, shas in history.items():
            gone = [s for s in shas if s not in keep and versions.exists(s)]
            gone = [s for s in gone if "live" not in (versions.ref(s) or {})]
            if not gone:
                continue
            size = sum(versions.stored_bytes(s) for s in gone)
            for sha in gone:
                txn.ops.append({"k": "u", "sha": sha})
                keep.add(sha)  # once per store, even if several files shared it
            txn.usage.versions = max(0, txn.usage.versions - size)
            detail = _detail(policy) | {"removed": str(len(gone))}
            txn.record("prune", path, size, None, None, detail=detail)
            removed += len(gone)
            freed += size
            touched += 1
        return PruneResult(
            store=str(files.store), policy=policy, removed=removed, freed_bytes=freed,
            files=touched,
        )  # fmt: skip

    return body


def _closure(files: StoreFiles, keep: set[str]) -> set[str]:
    """``keep`` and every version a kept one's reference leads to."""
    versions = files.versions
    todo = list(keep)
    seen = set(keep)
    while todo:
        ref = versions.ref(todo.pop()) or {}
        target = ref.get("prefix") or ref.get("splice")
        if isinstance(target, str):
            resolved = versions.resolve(target)
            if resolved not in seen:
                seen.add(resolved)
                todo.append(resolved)
    return seen


def write_policy(state: Path, raw: dict[str, object]) -> None:
    from . import _fs

    _fs.write_redoable(policy_path(state), json.dumps(raw).encode())
