"""The rules every change to a store obeys: compare-and-set, quota, scan.

Written once here and read by every mutation (the ``lw.memory.*`` activities, bash
commits, restores, promotions), so a rule cannot differ between the ways in.
"""

from __future__ import annotations

import re
from typing import Protocol

from .._definitions import MemoryQuota
from .._scan import Finding
from ..errors._kinds import INVALID_REQUEST, MEMORY_CONFLICT, QUOTA_EXCEEDED, SCAN_BLOCKED, lw_error
from . import _fs
from ._index import Usage
from ._records import ABSENT, Provenance


class PlannedChange(Protocol):
    """What a rule reads of the change being planned (``_txn.Txn`` is one): the rules
    sit below the transaction, which calls them."""

    quota: MemoryQuota

    def kind(self, parts: tuple[str, ...], shown: str) -> str | None: ...

    def quota_problem(self) -> str | None: ...


SHA = re.compile(r"[0-9a-f]{64}")


def mib(n: int) -> str:
    return f"{n / (1024 * 1024):.2f} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def check_precondition(expected: str | None, actual: str | None, shown: str, who: str) -> None:
    """``if_sha256``: the write applies only if the file is at ``expected`` (or
    absent, for :data:`ABSENT`)."""
    if expected is None:
        return
    if expected == ABSENT:
        if actual is not None:
            raise lw_error(
                MEMORY_CONFLICT,
                f"{who}: {shown} already exists (sha256 {actual}) but the write required it "
                "to be absent; read it and write with if_sha256 set to its content_sha256",
            )
        return
    if not SHA.fullmatch(expected):
        raise lw_error(
            INVALID_REQUEST,
            f"{who}: if_sha256 for {shown} must be a lowercase sha256 hex digest or "
            f"{ABSENT!r}, got {expected!r}",
        )
    if actual != expected:
        now = "does not exist" if actual is None else f"is at sha256 {actual}"
        raise lw_error(
            MEMORY_CONFLICT,
            f"{who}: {shown} {now}, not at the expected {expected}: another writer changed "
            "it; read it again, merge, and retry with the new content_sha256",
        )


def file_too_big(quota: MemoryQuota, path: str, size: int) -> str | None:
    """Checked on a size alone (an ``lstat``), before any byte is read."""
    if size > quota.max_file_bytes:
        return (
            f"{path} would be {mib(size)}, over the per-file quota of "
            f"{mib(quota.max_file_bytes)} (MemoryQuota.max_file_bytes); split the file"
        )
    return None


def quota_problem(quota: MemoryQuota, store: str, before: Usage, after: Usage) -> str | None:
    """What the store would break going from ``before`` to ``after``.

    The byte quota counts what the store holds on disk: its current files, its kept
    versions, its search index (once a search made one) *and* its own records (audit
    log, journal, idempotency ledger), which every change adds to. Once that total is
    over the quota only a change that shrinks the current files or removes files or
    folders is accepted, so a full store can still be cleaned up, while churn (a folder
    made and removed again and again) cannot grow its records past a bound: each
    accepted change takes at least a byte or an entry away. Files and folders count
    alike toward ``max_files`` (an empty folder still costs an inode and a listing
    line).
    """
    frees = after.live < before.live or after.entries < before.entries
    if after.bytes > quota.max_bytes and not frees:
        return (
            f"store {store} would hold {mib(after.bytes)} ({mib(after.live)} in current "
            f"files, {mib(after.versions)} in kept versions"
            + (f", {mib(after.index)} in its search index" if after.index else "")
            + f", {mib(after.bookkeeping)} in its audit log, journal and ledger), over its "
            f"quota of {mib(quota.max_bytes)} (MemoryQuota.max_bytes); until it is under, "
            "only shrinking or deleting files or folders is accepted: delete or condense old "
            "notes, prune old versions (lw-temporal memory prune), or raise the quota"
        )
    entries = after.entries
    if entries > before.entries and entries > quota.max_files:
        what = f"{after.files} files" + (f" and {after.dirs} folders" if after.dirs else "")
        return (
            f"store {store} would hold {what}, over its quota of "
            f"{quota.max_files} (MemoryQuota.max_files, files and folders alike); merge "
            "small notes or raise the quota"
        )
    return None


def blocked(findings: list[Finding]) -> str | None:
    """Why the scan refuses a change, or ``None``."""
    blocking = [f for f in findings if f.blocking]
    if not blocking:
        return None
    what = "; ".join(f"{f.rule} at line {f.line} ({f.excerpt})" for f in blocking)
    return (
        f"the content contains {what}. Secrets and blocked personal data must not be "
        "stored in memory: remove them (refer to a secret manager instead) and write again"
    )


def file_parts(path: str, shown: str, provenance: Provenance) -> tuple[str, ...]:
    parts = _fs.clean_relative(path, shown)
    if not parts:
        raise lw_error(
            INVALID_REQUEST, f"{provenance.who()}: {shown} is a folder; name a file inside it"
        )
    return parts


def check_file_kind(txn: PlannedChange, parts: tuple[str, ...], shown: str, who: str) -> None:
    kind = txn.kind(parts, shown)
    if kind == "link":
        raise _fs._link_error(shown, parts[-1])
    if kind not in (None, "file"):
        raise lw_error(INVALID_REQUEST, f"{who}: {shown} is a {kind}, not a file")


def refuse(
    txn: PlannedChange,
    op: str,
    shown: str,
    who: str,
    scan_refusal: str | None,
    size: int,
    *,
    early: bool = False,
) -> None:
    """Raise the typed refusal for a broken rule: the scan, then the per-file
    size (``early``: before anything is planned), then the store's quota."""
    if scan_refusal:
        raise lw_error(SCAN_BLOCKED, f"{who}: {op} to {shown} refused: {scan_refusal}")
    problem = file_too_big(txn.quota, shown, size)
    if problem is None and not early:
        problem = txn.quota_problem()
    if problem:
        raise lw_error(QUOTA_EXCEEDED, f"{who}: {op} to {shown} refused: {problem}")
