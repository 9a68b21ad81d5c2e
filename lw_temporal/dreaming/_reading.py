"""Pieces of reading runs for a dream: whether a closed run belongs to the target, how the
cursor advances, a command's memory changes from its events, and the records streamed to
a batch file with heartbeats."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity

from .._ids import (
    InvalidWorkflowId,
    Role,
    parse_workflow_id,
)
from ..memory._records import AuditEntry
from ._records import (
    MAX_ITEMS_PER_RUN,
    Cursor,
    RunRecord,
)

T = TypeVar("T")


def _is_run_of(workflow_id: str, target: str) -> bool:
    try:
        run = parse_workflow_id(workflow_id)
    except InvalidWorkflowId:
        return False
    return run.role is Role.PLANNER and run.definition_id == target


def _advance(cursor: Cursor, taken: list[dict[str, Any]], audit_offset: int) -> Cursor:
    if not taken:
        return cursor.model_copy(update={"audit_offset": audit_offset})
    newest = datetime.fromisoformat(taken[-1]["close_time"])
    at_newest = {
        i["workflow_id"] for i in taken if datetime.fromisoformat(i["close_time"]) == newest
    }
    if cursor.close_time == newest:
        at_newest |= set(cursor.workflow_ids)
    return Cursor(
        close_time=newest, workflow_ids=tuple(sorted(at_newest)), audit_offset=audit_offset
    )


def _bash_changes(
    entries: list[tuple[int, AuditEntry]], end: int, claimed: set[str], hold: set[str]
) -> tuple[dict[str, list[AuditEntry]], int]:
    """The claimed runs' bash-made changes (their ``lw.memory.*`` calls are already in
    their histories), by planner ID, and the audit offset the next dream reads from: the
    first entry of a run not yet claimed but still to come, else the end of the log."""
    by_planner: dict[str, list[AuditEntry]] = {}
    next_offset = end
    for offset, entry in entries:
        if entry.workflow_id is None:
            continue
        try:
            planner = parse_workflow_id(entry.workflow_id).planner_id
        except InvalidWorkflowId:
            continue
        if planner is None:
            continue
        key = str(planner)
        if key in hold:
            next_offset = min(next_offset, offset)
        if entry.activity_type != "lw.bash" or key not in claimed:
            continue
        found = by_planner.setdefault(key, [])
        if len(found) < MAX_ITEMS_PER_RUN:
            found.append(entry)
    return by_planner, next_offset


class _Counter:
    def __init__(self) -> None:
        self.count = 0

    def wrap(self, records: Iterator[RunRecord]) -> Iterator[RunRecord]:
        for record in records:
            self.count += 1
            yield record


def _stream_records(files: Iterable[Path]) -> Iterator[RunRecord]:
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield RunRecord.model_validate_json(line)


async def _with_heartbeats(
    work: Awaitable[T], details: Callable[[], object], every: float = 5.0
) -> T:
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every)
        if done:
            return task.result()
        activity.heartbeat(details())
