"""Forget a run tree: shred its key, remove what its runs left on disk, audit it.

The key goes first: every payload of the tree's histories (on the server, in its
archives, in any export) was sealed with it, so once it is shredded none of them can be
opened anywhere, and the tree's ID can never be given a new key. Then, on this data
dir: the tree's scratch (every run's, under ``runs/<tree>/``), its conversations
(``.lw/conversations/<tree>/``), its run markers and tree entry, and its share of every
dream's inputs (the per-run files ``runs/<run>.md``, the records and batches a dream
extracted, the runs a dream handed back). Memory the tree's runs wrote stays unless
``memory="revert"`` (see :mod:`._forget_memory`); what stays is named in the report,
with what erases it. Each step is an *eraser*; a module with its own copy of run data
(memory search's index) adds one with :func:`add_eraser`.

A tree with a run still going is refused unless ``terminate`` (then its running
workflows are terminated first). One line per erasure goes to the memory root's
``.lw/audit/forget.jsonl``, naming what was removed and what remains.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from .._ids import AgentId, DataLayout, InvalidWorkflowId, parse_workflow_id
from ..dreaming._runfile import run_file_name
from ..memory._retention._gc import discard_folder, tree_size
from ..memory._stores import MemoryStores
from . import _places
from ._keys import KeyStore
from ._records import FORGET_AUDIT, MAX_LISTED, ForgetReport, MemoryMode, Place

_TERMINATE_WAIT = 60.0


class ForgetRefused(Exception):
    """``forget`` cannot run as asked; nothing was erased."""


def in_tree(workflow_id: str | None, tree: str) -> bool:
    return workflow_id is not None and (workflow_id == tree or workflow_id.startswith(tree + "/"))


@dataclass
class Erasure:
    """One erasure in progress: what each eraser reads and adds to."""

    layout: DataLayout
    tree: AgentId
    stores: MemoryStores
    by: str
    why: str
    memory: MemoryMode
    #: Workflow IDs of the tree known from Temporal and from the disk.
    workflow_ids: set[str] = field(default_factory=set)
    removed: list[Place] = field(default_factory=list)
    remaining: list[Place] = field(default_factory=list)

    @property
    def tree_id(self) -> str:
        return str(self.tree)

    def rel(self, path: Path) -> str:
        for root in (self.layout.local_root, self.layout.root):
            with contextlib.suppress(ValueError):
                return path.relative_to(root).as_posix()
        return str(path)

    def remove_folder(self, what: str, path: Path) -> None:
        if not path.exists():
            return
        files, size, _ = tree_size(path)
        try:
            discard_folder(path, self.layout)
        except OSError as err:
            self.remaining.append(Place(what=what, path=self.rel(path), note=f"not removed: {err}"))
            return
        self.removed.append(Place(what=what, path=self.rel(path), files=files, bytes=size))

    def remove_file(self, what: str, path: Path, root: Path | None = None) -> None:
        """Remove one file; under ``root`` (a folder an agent writes in) by descriptor."""
        try:
            size = path.lstat().st_size
            if root is None:
                path.unlink()
            else:
                _places.unlink(root, path)
        except FileNotFoundError:
            return
        except OSError as err:
            self.remaining.append(Place(what=what, path=self.rel(path), note=f"not removed: {err}"))
            return
        self.removed.append(Place(what=what, path=self.rel(path), files=1, bytes=size))


Eraser = Callable[[Erasure], None]
_ERASERS: list[Eraser] = []


def add_eraser(eraser: Eraser) -> Eraser:
    """Register a step every ``forget`` runs after the built-in ones (memory search's
    index, for one: it must drop what it indexed of the tree's runs). Its docstring is
    the line ``forget`` prints as it runs it (``erasing <docstring>``): one short phrase."""
    if eraser not in _ERASERS:
        _ERASERS.append(eraser)
    return eraser


def top_level(workflow_id: str) -> AgentId:
    """The tree ``workflow_id`` names, refused unless it is a top-level run's ID."""
    try:
        agent = parse_workflow_id(workflow_id)
    except InvalidWorkflowId as err:
        raise ForgetRefused(f"WORKFLOW_ID {workflow_id!r}: {err}") from None
    top = agent
    while top.parent is not None:
        top = top.parent
    if top != agent:
        raise ForgetRefused(
            f"{workflow_id} is part of the run tree {top}: its payloads share that tree's "
            f"key, so forget erases whole trees; forget {top}"
        )
    return agent


async def tree_executions(client: Client, tree: str) -> list[tuple[str, str, str]]:
    """``(workflow id, run id, status)`` of every execution of the tree Temporal lists."""
    query = f"WorkflowId = '{tree}' OR WorkflowId STARTS_WITH '{tree}/'"
    found: list[tuple[str, str, str]] = []
    async for execution in client.list_workflows(query):
        status = execution.status.name if execution.status is not None else "UNKNOWN"
        found.append((execution.id, execution.run_id, status))
    return found


async def _running(client: Client, workflow_ids: set[str]) -> list[str]:
    """The IDs among ``workflow_ids`` whose latest run is still going (asked of each
    workflow, not of visibility, which may lag)."""
    running = []
    for workflow_id in sorted(workflow_ids):
        try:
            status = (await client.get_workflow_handle(workflow_id).describe()).status
        except RPCError as err:
            if err.status is RPCStatusCode.NOT_FOUND:
                continue
            raise
        if status is WorkflowExecutionStatus.RUNNING:
            running.append(workflow_id)
    return running


async def forget_tree(
    client: Client,
    layout: DataLayout,
    workflow_id: str,
    *,
    by: str,
    why: str,
    keys: KeyStore,
    stores: MemoryStores | None = None,
    terminate: bool = False,
    memory: MemoryMode = "keep",
    progress: Callable[[str], None] | None = None,
) -> ForgetReport:
    """Erase the run tree ``workflow_id`` (see the module docstring)."""
    say = progress or (lambda _line: None)
    if not by.strip():
        raise ForgetRefused("say who forgets (--by NAME): the audit line names them")
    tree = top_level(workflow_id)
    tree_id = str(tree)
    executions = await tree_executions(client, tree_id)
    known = {w for w, _, _ in executions} | {tree_id}
    running = await _running(client, known)
    terminated: list[str] = []
    if running and not terminate:
        raise ForgetRefused(
            f"run tree {tree_id} is still running ({', '.join(running[:5])}"
            f"{' and more' if len(running) > 5 else ''}): wait for it to end, or pass "
            "--terminate to terminate it first; nothing was erased"
        )
    for running_id in running:
        say(f"terminating {running_id}")
        with contextlib.suppress(RPCError):
            # The reason stays in the history in the clear, past the key's shredding:
            # why (which may name the person asking) is in the forget audit line only.
            await client.get_workflow_handle(running_id).terminate(
                reason=f"lw-temporal forget by {by} (why: see .lw/audit/forget.jsonl)"
            )
        terminated.append(running_id)
    await _wait_closed(client, set(terminated))
    erasure = Erasure(
        layout, tree, stores or MemoryStores(layout), by, why, memory, workflow_ids=known
    )
    say(f"shredding the key of {tree_id}")
    already = await keys.shredded(tree_id)
    shredded = await keys.shred(tree_id, by=by)
    for eraser in (*_BUILT_IN, *_ERASERS):
        what = (eraser.__doc__ or eraser.__name__).strip()
        say(f"erasing {what}")
        try:
            await asyncio.to_thread(eraser, erasure)
        except Exception as err:  # the others still run, and the audit says what failed
            erasure.remaining.append(Place(what="not erased", path=what, note=repr(err)))
    report = ForgetReport(
        tree=tree_id,
        by=by,
        why=why,
        time=datetime.now(UTC).isoformat(),
        runs=tuple(f"{w} (run {r}, {s.lower()})" for w, r, s in executions[:MAX_LISTED]),
        runs_count=len(executions),
        terminated=tuple(terminated),
        key_shredded=shredded,
        already_forgotten=already and not shredded,
        memory=memory,
        removed=tuple(erasure.removed[:MAX_LISTED]),
        remaining=tuple(erasure.remaining[:MAX_LISTED]),
        removed_count=len(erasure.removed),
        remaining_count=len(erasure.remaining),
    )
    _audit(layout, report)
    return report


async def _wait_closed(client: Client, workflow_ids: set[str]) -> None:
    deadline = asyncio.get_running_loop().time() + _TERMINATE_WAIT
    while workflow_ids and await _running(client, workflow_ids):
        if asyncio.get_running_loop().time() > deadline:
            raise ForgetRefused(
                f"terminated workflows of the tree still show as running after "
                f"{_TERMINATE_WAIT:.0f}s; nothing was erased: try again"
            )
        await asyncio.sleep(0.2)


def _audit(layout: DataLayout, report: ForgetReport) -> None:
    folder = layout.state / "audit"
    folder.mkdir(parents=True, exist_ok=True)
    line: dict[str, Any] = {
        "op": "forget",
        **report.model_dump(mode="json", exclude={"removed", "remaining"}),
        "removed": [p.line() for p in report.removed],
        "remaining": [p.line() for p in report.remaining],
    }
    with (folder / FORGET_AUDIT).open("a", encoding="utf-8") as log:
        log.write(json.dumps(line, sort_keys=True) + "\n")
        log.flush()
        os.fsync(log.fileno())


# -- the built-in erasers ----------------------------------------------------------------


def _scratch(erasure: Erasure) -> None:
    """the tree's scratch (every run's)"""
    run_root = erasure.layout.run_dir(erasure.tree)
    for found, _ in _places.walk(run_root):  # IDs of runs only the disk knows of
        parts = found.relative_to(erasure.layout.runs).parts
        if "scratch" in parts:
            with contextlib.suppress(InvalidWorkflowId):
                run = "/".join(parts[: parts.index("scratch")])
                erasure.workflow_ids.add(str(parse_workflow_id(run)))
    erasure.remove_folder("scratch of the tree", run_root)
    entry = erasure.layout.tree_entry(erasure.tree)
    if entry.exists():
        held = _read_json(entry) or {}
        runs_root = held.get("runs_root")
        if runs_root and Path(runs_root) != erasure.layout.local_root:
            erasure.remaining.append(
                Place(
                    what="scratch on another host",
                    path=f"{runs_root}/runs/{erasure.tree_id}",
                    note=f"host {held.get('host')!r}: run forget there with --runs-root "
                    f"{runs_root}",
                )
            )


def _conversations(erasure: Erasure) -> None:
    """the tree's conversations (turn files, recorded tool results)"""
    folder = _places.conversations(erasure.layout).joinpath(*erasure.tree.segments[:1])
    erasure.remove_folder("conversations", folder)


def _markers(erasure: Erasure) -> None:
    """the tree's run markers and tree entry"""
    layout = erasure.layout
    for workflow_id in sorted(erasure.workflow_ids):
        with contextlib.suppress(InvalidWorkflowId):
            erasure.remove_file("run marker", layout.run_marker(parse_workflow_id(workflow_id)))
    erasure.remove_file("tree entry", layout.tree_entry(erasure.tree))


def _dream_inputs(erasure: Erasure) -> None:
    """the tree's runs in every dream's inputs"""
    tree = erasure.tree_id
    prefix = run_file_name(tree)[: -len(".md")]
    for dream in _places.dream_runs(erasure.layout):
        if dream.name == erasure.tree.segments[0]:
            continue  # the dream being forgotten: its whole folder went with its scratch
        scratch = dream / "scratch"
        read = False
        for path, _info in list(_places.walk(scratch / "runs")):
            name = path.name
            if name == f"{prefix}.md" or name.startswith(f"{prefix}+"):
                erasure.remove_file("dream run file", path, scratch)
                read = True
        for path, _info in list(_places.walk(scratch / "dream")):
            read = _filter_records(erasure, path, scratch) or read
        if read:
            erasure.remaining.append(
                Place(
                    what="dream that read the tree",
                    path=erasure.rel(dream),
                    note=f"its conversation and history hold what it read of {tree}; "
                    f"forget {dream.name} to erase them",
                )
            )
    books = _places.dream_books(erasure.layout)
    if erasure.tree.dream and erasure.tree.definition_id is not None:
        target = books / erasure.tree.definition_id
        erasure.remove_folder("dream proposal", target / "proposals" / erasure.tree.segments[0])
        erasure.remove_file("runs a dream handed back", target / "released" / f"{tree}.json")
    for path, _info in list(_places.walk(books)):
        if path.parent.name == "released" or path.name == "runs.json":
            _filter_records(erasure, path, books)


def _filter_records(erasure: Erasure, path: Path, root: Path) -> bool:
    """Drop the tree's runs from one JSON record, list or JSONL file under ``root``
    (read and rewritten by descriptor); whether it had any."""
    tree = erasure.tree_id
    try:
        data = _places.read_at(root, path)
    except OSError:
        return False
    if data is None or tree.encode() not in data:
        return False
    like = path.lstat()
    if path.suffix == ".jsonl":
        kept = [line for line in data.splitlines() if not _mentions(line, tree)]
        _places.rewrite(root, path, b"".join(line + b"\n" for line in kept), like)
        erasure.removed.append(Place(what="dream records of the tree", path=erasure.rel(path)))
        return True
    try:
        value = json.loads(data)
    except ValueError:
        return False
    if isinstance(value, dict) and in_tree(value.get("workflow_id"), tree):
        erasure.remove_file("dream record", path, root)
        return True
    if isinstance(value, list):
        kept_items = [item for item in value if not _item_in_tree(item, tree)]
        if len(kept_items) != len(value):
            _places.rewrite(root, path, json.dumps(kept_items).encode(), like)
            erasure.removed.append(Place(what="dream run list entries", path=erasure.rel(path)))
            return True
    return False


def _item_in_tree(item: Any, tree: str) -> bool:
    if isinstance(item, str):
        return in_tree(item, tree)
    return isinstance(item, dict) and in_tree(item.get("workflow_id"), tree)


def _mentions(line: bytes, tree: str) -> bool:
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return _item_in_tree(value, tree)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# memory the tree's runs wrote: ``_forget_memory`` adds itself first of the added steps
_BUILT_IN: tuple[Eraser, ...] = (_scratch, _conversations, _markers, _dream_inputs)
