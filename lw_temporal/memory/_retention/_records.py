"""Retention's policy and report: pure data, the only module its workflow imports."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from ..._base import FrozenModel

RETENTION_WORKFLOW = "lw.ScratchRetention"
RETENTION_GC = "lw.retention.gc"
RETENTION_SCHEDULE_ID = "lw-scratch-retention"
AUDIT_FILE = "retention.jsonl"


class RetentionPolicy(FrozenModel):
    """``retain=None`` keeps every scratch forever (the seeds' default)."""

    retain: timedelta | None = None
    dry_run: bool = False
    #: How many removals the report lists; the audit log has all of them.
    max_listed: int = Field(default=100, ge=0, le=10_000)


class GcItem(FrozenModel):
    workflow_id: str
    path: str
    files: int
    bytes: int
    closed: datetime | None
    why: str
    #: ``scratch``, or what the run left in the bookkeeping (``conversation``,
    #: ``dream proposal``).
    what: str = "scratch"


class GcReport(FrozenModel):
    """What one retention pass removed and why it kept the rest (runs still open,
    scratch closed more recently than ``retain``)."""

    retain: timedelta | None
    dry_run: bool
    removed: tuple[GcItem, ...] = ()
    removed_count: int = 0
    removed_bytes: int = 0
    kept_running: int = 0
    kept_recent: int = 0
    skipped: tuple[str, ...] = ()
    #: The runs' conversations and dream proposals removed with their scratch.
    bookkeeping_removed: tuple[GcItem, ...] = ()
    bookkeeping_removed_count: int = 0
    bookkeeping_removed_bytes: int = 0
    #: Kept versions the memory stores' retention policies removed in the same pass.
    versions_pruned: int = 0
