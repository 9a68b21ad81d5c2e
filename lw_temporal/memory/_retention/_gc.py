"""Finding and removing the scratch of runs closed longer than the retention period.

Whether a run is still going is asked of Temporal (``describe``), never guessed from
the disk: a running run's scratch, and the scratch of anything inside a running
pipeline, is never touched. Every deletion is appended to an audit log under
``<dataDir>/.lw/audit/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from ..._ids import AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id
from ..._sandbox import remove_tree
from ..._tree import entries_below
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


def tree_size(path: Path) -> tuple[int, int, float]:
    """Files, bytes and the newest modification time in a tree (links not followed;
    iterative, so a command's 1,200-deep folders cannot stop the collection)."""
    files = total = 0
    newest = path.lstat().st_mtime
    for _entry, info in entries_below(str(path)):
        newest = max(newest, info.st_mtime)
        if not stat.S_ISDIR(info.st_mode):
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
    ``policy.retain`` ago, and with it what the same runs left in the bookkeeping: their
    conversations (``.lw/conversations/``) and, for a dream, its proposal folder.

    A run Temporal no longer knows (its history outlived the namespace retention) is
    judged by the newest modification time inside its folder.
    """
    if policy.retain is None:
        return GcReport(retain=None, dry_run=policy.dry_run)
    now = now or datetime.now(UTC)
    judge = _Judge(_Status(client), now - policy.retain)
    removed: list[GcItem] = []
    books: list[GcItem] = []
    removed_count = removed_bytes = books_count = books_bytes = 0
    skipped: list[str] = []
    items = [(a, p, "scratch") for a, p in scratch_dirs(layout)] + list(bookkeeping_dirs(layout))
    for n, (agent_id, folder, what) in enumerate(items):
        if progress is not None:
            progress({"checked": n, "removed": removed_count + books_count})
        item = await judge.item(agent_id, folder, what, layout)
        if item is None:
            continue
        if not policy.dry_run:
            try:
                await asyncio.to_thread(discard_folder, folder, layout)
            except OSError as err:
                if len(skipped) < policy.max_listed:
                    skipped.append(f"{item.path}: {err}")
                continue
            _audit(layout, item, actor, policy.retain)
        if what == "scratch":
            removed_count += 1
            removed_bytes += item.bytes
            if len(removed) < policy.max_listed:
                removed.append(item)
        else:
            books_count += 1
            books_bytes += item.bytes
            if len(books) < policy.max_listed:
                books.append(item)
    return GcReport(
        retain=policy.retain,
        dry_run=policy.dry_run,
        removed=tuple(removed),
        removed_count=removed_count,
        removed_bytes=removed_bytes,
        kept_running=judge.running,
        kept_recent=judge.recent,
        skipped=tuple(skipped),
        bookkeeping_removed=tuple(books),
        bookkeeping_removed_count=books_count,
        bookkeeping_removed_bytes=books_bytes,
    )


class _Judge:
    """Whether one run's folder is old enough to go: never while the run or any of its
    ancestors runs; counts what it keeps (scratch folders only, as before)."""

    def __init__(self, status: _Status, cutoff: datetime) -> None:
        self.status = status
        self.cutoff = cutoff
        self.running = self.recent = 0

    async def item(
        self, agent_id: AgentId, folder: Path, what: str, layout: DataLayout
    ) -> GcItem | None:
        workflow_id = str(agent_id)
        own = await self.status.get(workflow_id)
        ancestors = [await self.status.get(str(a)) for a in _ancestors(agent_id)]
        if (own is not None and own[0]) or any(a is not None and a[0] for a in ancestors):
            self.running += what == "scratch"
            return None
        files, size, newest = await asyncio.to_thread(tree_size, folder)
        if own is not None:
            closed = own[1]
            why = f"closed {closed.isoformat()}" if closed is not None else "closed"
        else:
            closed = datetime.fromtimestamp(newest, UTC)
            why = f"unknown to Temporal; untouched since {closed.isoformat()}"
        if closed is None or closed > self.cutoff:
            self.recent += what == "scratch"
            return None
        root = layout.local_root if folder.is_relative_to(layout.local_root) else layout.root
        return GcItem(
            workflow_id=workflow_id,
            path=folder.relative_to(root).as_posix(),
            files=files,
            bytes=size,
            closed=closed,
            why=why,
            what=what,
        )


def bookkeeping_dirs(layout: DataLayout) -> Iterator[tuple[AgentId, Path, str]]:
    """What runs leave in the bookkeeping, per run: each agent's conversation folders
    (``.lw/conversations/<its ID>/<run id>/`` and ``results/``, beside its children's
    ``sub-runs/`` and ``steps/``) and each dream's proposal folder."""
    root = layout.conversations
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        agent: AgentId | None = None
        if folder != root:
            try:
                agent = parse_workflow_id(folder.relative_to(root).as_posix())
            except InvalidWorkflowId:
                agent = None
        for entry in children:
            if not entry.is_dir(follow_symlinks=False):
                continue
            if agent is not None and entry.name not in ("sub-runs", "steps"):
                yield agent, Path(entry.path), "conversation"
            else:
                stack.append(Path(entry.path))
    dreaming = layout.state / "dreaming"
    for proposals in sorted(dreaming.glob("*/proposals")):
        for entry in sorted(os.scandir(proposals), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(InvalidWorkflowId):
                    yield parse_workflow_id(entry.name), Path(entry.path), "dream proposal"


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
        "op": f"{item.what.replace(' ', '-')}.delete",
        "what": item.what,
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
