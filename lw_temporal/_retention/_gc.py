"""Finding and removing the scratch of runs closed longer than the retention period.

Whether a run is still going is asked of Temporal (``describe``), never guessed from
the disk: a running run's scratch, and the scratch of anything inside a running
pipeline, is never touched. Every deletion is appended to an audit log under
``<dataDir>/.lw/audit/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from .._ids import AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id
from .._sandbox import remove_tree
from ._records import AUDIT_FILE, GcItem, GcReport, RetentionPolicy


def scratch_dirs(layout: DataLayout) -> Iterator[tuple[AgentId, Path]]:
    """Every run's scratch folder under ``runs/``, found by walking the ID grammar's
    folders (never descending into a scratch: its content is the agents')."""
    if not layout.runs.is_dir():
        return
    stack = [layout.runs]
    while stack:
        folder = stack.pop()
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for entry in children:
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            if entry.name == "scratch" and folder != layout.runs:
                rel = folder.relative_to(layout.runs).as_posix()
                try:
                    agent_id = parse_workflow_id(rel)
                except InvalidWorkflowId:
                    continue
                yield agent_id, path
            else:
                stack.append(path)


def _size(path: Path) -> tuple[int, int, float]:
    """Files, bytes and the newest modification time in a tree (links not followed;
    iterative, so a command's 1,200-deep folders cannot stop the collection)."""
    files = total = 0
    newest = path.lstat().st_mtime
    stack = [str(path)]
    while stack:
        try:
            scan = os.scandir(stack.pop())
        except OSError:
            continue
        with scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                newest = max(newest, info.st_mtime)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                else:
                    files += 1
                    total += info.st_size
    return files, total, newest


class _Status:
    """Temporal's view of each run, asked once per ID."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.cache: dict[str, tuple[bool, datetime | None] | None] = {}

    async def get(self, workflow_id: str) -> tuple[bool, datetime | None] | None:
        """``(running, close_time)``, or ``None`` when Temporal no longer knows the ID."""
        if workflow_id not in self.cache:
            try:
                description = await self.client.get_workflow_handle(workflow_id).describe()
            except RPCError as err:
                if err.status is not RPCStatusCode.NOT_FOUND:
                    raise
                self.cache[workflow_id] = None
            else:
                running = description.status is WorkflowExecutionStatus.RUNNING
                self.cache[workflow_id] = (running, description.close_time)
        return self.cache[workflow_id]


def _ancestors(agent_id: AgentId) -> Iterator[AgentId]:
    parent = agent_id.parent
    while parent is not None:
        yield parent
        parent = parent.parent


async def collect_garbage(
    client: Client,
    layout: DataLayout,
    policy: RetentionPolicy,
    *,
    actor: str,
    progress: Callable[[dict[str, Any]], None] | None = None,
    now: datetime | None = None,
) -> GcReport:
    """Remove (or with ``dry_run`` only list) the scratch of runs closed longer than
    ``policy.retain`` ago.

    A run Temporal no longer knows (its history outlived the namespace retention) is
    judged by the newest modification time inside its scratch.
    """
    if policy.retain is None:
        return GcReport(retain=None, dry_run=policy.dry_run)
    now = now or datetime.now(UTC)
    cutoff = now - policy.retain
    status = _Status(client)
    removed: list[GcItem] = []
    removed_count = removed_bytes = kept_running = kept_recent = 0
    skipped: list[str] = []
    for n, (agent_id, scratch) in enumerate(scratch_dirs(layout)):
        if progress is not None:
            progress({"checked": n, "removed": removed_count})
        workflow_id = str(agent_id)
        own = await status.get(workflow_id)
        ancestors = [await status.get(str(a)) for a in _ancestors(agent_id)]
        if (own is not None and own[0]) or any(a is not None and a[0] for a in ancestors):
            kept_running += 1
            continue
        files, size, newest = await asyncio.to_thread(_size, scratch)
        if own is not None:
            closed = own[1]
            why = f"closed {closed.isoformat()}" if closed is not None else "closed"
        else:
            closed = datetime.fromtimestamp(newest, UTC)
            why = f"unknown to Temporal; untouched since {closed.isoformat()}"
        if closed is None or closed > cutoff:
            kept_recent += 1
            continue
        item = GcItem(
            workflow_id=workflow_id,
            path=scratch.relative_to(layout.local_root).as_posix(),
            files=files,
            bytes=size,
            closed=closed,
            why=why,
        )
        if not policy.dry_run:
            try:
                await asyncio.to_thread(discard_folder, scratch, layout)
            except OSError as err:
                if len(skipped) < policy.max_listed:
                    skipped.append(f"{item.path}: {err}")
                continue
            _audit(layout, item, actor, policy.retain)
        removed_count += 1
        removed_bytes += size
        if len(removed) < policy.max_listed:
            removed.append(item)
    return GcReport(
        retain=policy.retain,
        dry_run=policy.dry_run,
        removed=tuple(removed),
        removed_count=removed_count,
        removed_bytes=removed_bytes,
        kept_running=kept_running,
        kept_recent=kept_recent,
        skipped=tuple(skipped),
    )


def discard_folder(folder: Path, layout: DataLayout) -> None:
    """Move the folder out of the agents' view first, so a half-finished removal never
    leaves a half-empty scratch behind, then delete it (by descriptor: ``remove_tree``,
    the sandbox's remover, never follows a link an agent planted). A folder on the
    memory root goes to that root's trash (a rename cannot cross file systems)."""
    state = layout.local_state if folder.is_relative_to(layout.local_root) else layout.state
    trash = state / "trash"
    trash.mkdir(parents=True, exist_ok=True)
    stamp = f"{os.getpid()}-{datetime.now(UTC).timestamp():.6f}"
    moved = trash / f"{stamp}-{folder.parent.name}-{folder.name}"
    os.rename(folder, moved)
    remove_tree(moved)


def _audit(layout: DataLayout, item: GcItem, actor: str, retain: timedelta) -> None:
    audit = layout.local_state / "audit"
    audit.mkdir(parents=True, exist_ok=True)
    entry = {
        "time": datetime.now(UTC).isoformat(),
        "op": "scratch.delete",
        "workflow_id": item.workflow_id,
        "path": item.path,
        "files": item.files,
        "bytes": item.bytes,
        "closed": item.closed.isoformat() if item.closed else None,
        "why": item.why,
        "retain_seconds": retain.total_seconds(),
        "actor": actor,
    }
    with (audit / AUDIT_FILE).open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry, sort_keys=True) + "\n")
