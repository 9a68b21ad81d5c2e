"""The activities of ``lw.Dreaming``: find runs, extract them, consolidate, promote."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._config import LwConfig
from .._errors import INVALID_REQUEST, INVALID_WORKFLOW_ID, NON_RETRYABLE, lw_error
from .._ids import (
    DREAMING_DEFINITION_ID,
    PLANNER_WORKFLOW,
    InvalidWorkflowId,
    Role,
    parse_workflow_id,
)
from .._memory import ABSENT, AuditEntry, MemoryStores, Provenance
from .._memory._fs import write_atomic
from .._scope import Scope, StoreKind, StoreRef
from ._consolidator import Consolidator, DefaultConsolidator, DreamContext
from ._history import extract_run, text_of
from ._models import (
    DREAM_CONSOLIDATE,
    DREAM_EXTRACT,
    DREAM_FIND_RUNS,
    DREAM_PROMOTE,
    MAX_ITEMS_PER_RUN,
    MAX_TEXT,
    ConsolidateRequest,
    ConsolidateResult,
    Cursor,
    ExtractRequest,
    ExtractResult,
    FindRunsRequest,
    FindRunsResult,
    MemoryOpRecord,
    NoteRef,
    PromoteRequest,
    PromotionOutcome,
    RunRecord,
)

#: What of the target's memory a consolidator is shown (its text files, bounded).
_MAX_MEMORY_FILE = 1024 * 1024
_MAX_MEMORY_TOTAL = 32 * 1024 * 1024


def _visibility_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_note_path(path: str) -> str:
    pure = PurePosixPath(path)
    if (
        not path
        or pure.is_absolute()
        or any(part in ("", ".", "..") for part in pure.parts)
        or "\x00" in path
        or str(pure) != path
    ):
        raise lw_error(
            INVALID_REQUEST,
            f"consolidator note path {path!r} must be a relative path without '.' or '..' "
            "segments inside the target's store",
        )
    return path


class DreamingActivities:
    """The activities of ``lw.Dreaming``; the worker-side parts live here.

    Args:
        config: the worker's data dir and definitions; the target must be registered.
        consolidator: turns run records into notes (default :class:`DefaultConsolidator`).
        stores: the memory stores' admin API (versions, compare-and-set, audit); the
            plugin passes its own so every writer shares one set of locks.
    """

    def __init__(
        self,
        config: LwConfig,
        consolidator: Consolidator | None = None,
        stores: MemoryStores | None = None,
    ) -> None:
        self.config = config
        self.consolidator: Consolidator = consolidator or DefaultConsolidator()
        self.stores = stores or MemoryStores.for_config(config)

    def callables(self) -> list[Callable[..., Any]]:
        """The activity callables to register on a worker."""
        return [self.find_runs, self.extract, self.consolidate, self.promote]

    def _dream_scope(self) -> Scope:
        scope = self.config.activity_scope()
        if scope.role is not Role.DREAMING or scope.run_id.definition_id is None:
            raise lw_error(
                INVALID_WORKFLOW_ID,
                f"workflow {scope.workflow_id!r}: dreaming activities run only in lw.Dreaming",
            )
        return scope

    def _scope(self) -> tuple[str, Path, str]:
        scope = self._dream_scope()
        assert scope.run_id.definition_id is not None
        return scope.run_id.definition_id, scope.own_scratch / "dream", scope.workflow_id

    def _provenance(self, scope: Scope, index: int, actor: str | None = None) -> Provenance:
        """The activity's provenance, made distinct per note: the stores keep one
        exactly-once record per activity and store, and one activity writes several
        notes."""
        provenance = Provenance.from_activity(scope, actor=actor)
        return provenance.model_copy(update={"activity_id": f"{provenance.activity_id}#{index}"})

    @activity.defn(name=DREAM_FIND_RUNS)
    async def find_runs(self, request: FindRunsRequest) -> FindRunsResult:
        target, work, _ = self._scope()
        statuses = " OR ".join(f"ExecutionStatus = '{s}'" for s in request.statuses)
        query = f"WorkflowType = '{PLANNER_WORKFLOW}' AND ({statuses})"
        cursor = request.cursor
        if cursor is not None:
            query += f" AND CloseTime >= '{_visibility_time(cursor.close_time)}'"
        consumed = set(cursor.workflow_ids) if cursor is not None else set()
        found: list[tuple[datetime, str, str, str]] = []
        seen = 0
        async for execution in activity.client().list_workflows(query):
            seen += 1
            if seen % 500 == 0:
                activity.heartbeat({"listed": seen})
            try:
                run = parse_workflow_id(execution.id)
            except InvalidWorkflowId:
                continue
            if run.role is not Role.PLANNER or run.definition_id != target:
                continue
            closed = execution.close_time
            if closed is None:
                continue
            if cursor is not None and (
                closed < cursor.close_time
                or (closed == cursor.close_time and execution.id in consumed)
            ):
                continue
            status = execution.status.name if execution.status is not None else "UNKNOWN"
            found.append((closed, execution.id, execution.run_id, status))
        found.sort()
        found = found[: request.max_runs]
        changes = await asyncio.to_thread(self._bash_changes, target, {w for _, w, _, _ in found})
        # One input file per batch, so each extract reads only its own share.
        for batch, start in enumerate(range(0, len(found), request.batch_size)):
            items = [
                {
                    "close_time": c.isoformat(),
                    "workflow_id": w,
                    "run_id": r,
                    "status": s,
                    "bash_changes": [e.model_dump(mode="json") for e in changes.get(w, ())],
                }
                for c, w, r, s in found[start : start + request.batch_size]
            ]
            write_atomic(work / "inputs" / f"{batch:06d}.json", json.dumps(items).encode())
        if not found:
            return FindRunsResult(runs=0, batches=0, cursor=cursor)
        newest = found[-1][0]
        at_newest = {w for c, w, _, _ in found if c == newest}
        if cursor is not None and cursor.close_time == newest:
            at_newest |= consumed
        batches = -(-len(found) // request.batch_size)
        return FindRunsResult(
            runs=len(found),
            batches=batches,
            cursor=Cursor(close_time=newest, workflow_ids=tuple(sorted(at_newest))),
        )

    @activity.defn(name=DREAM_EXTRACT)
    async def extract(self, request: ExtractRequest) -> ExtractResult:
        target, work, workflow_id = self._scope()
        source = work / "inputs" / f"{request.batch:06d}.json"
        try:
            chunk = json.loads(source.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {workflow_id!r}: no run list at {source}; {DREAM_FIND_RUNS} must "
                "run first",
            ) from None
        target_store = StoreRef(StoreKind.WORKFLOW, target)
        client = activity.client()
        lines: list[str] = []
        commands = failures = memory_ops = 0
        for done, item in enumerate(chunk):
            activity.heartbeat({"batch": request.batch, "done": done, "of": len(chunk)})
            closed = datetime.fromisoformat(item["close_time"])
            record = await extract_run(
                client, item["workflow_id"], item["run_id"], item["status"], closed
            )
            if item["bash_changes"]:
                entries = [AuditEntry.model_validate(e) for e in item["bash_changes"]]
                extra = await asyncio.to_thread(self._bash_ops, target_store, entries)
                record = record.model_copy(update={"memory_ops": record.memory_ops + extra})
            commands += len(record.commands)
            failures += len(record.failures)
            memory_ops += len(record.memory_ops)
            lines.append(record.model_dump_json())
        write_atomic(
            work / "batches" / f"{request.batch:06d}.jsonl", ("\n".join(lines) + "\n").encode()
        )
        return ExtractResult(
            runs=len(chunk), commands=commands, failures=failures, memory_ops=memory_ops
        )

    def _bash_changes(self, target: str, planners: set[str]) -> dict[str, list[AuditEntry]]:
        """The target store's audit entries made by bash commands of these runs (their
        ``lw.memory.*`` calls are already in the histories), by planner ID."""
        by_planner: dict[str, list[AuditEntry]] = {}
        for entry in self.stores.audit(StoreRef(StoreKind.WORKFLOW, target)):
            if entry.activity_type != "lw.bash" or entry.workflow_id is None:
                continue
            try:
                planner = parse_workflow_id(entry.workflow_id).planner_id
            except InvalidWorkflowId:
                continue
            if planner is not None and str(planner) in planners:
                entries = by_planner.setdefault(str(planner), [])
                if len(entries) < MAX_ITEMS_PER_RUN:
                    entries.append(entry)
        return by_planner

    def _bash_ops(self, store: StoreRef, entries: list[AuditEntry]) -> tuple[MemoryOpRecord, ...]:
        """What each bash-made change wrote: the added tail of a grown file, else the
        new content, read back from the store's kept versions."""
        ops: list[MemoryOpRecord] = []
        for entry in entries:
            content: str | None = None
            after = self.stores.blob(store, entry.sha256_after) if entry.sha256_after else None
            if after is not None:
                before = (
                    self.stores.blob(store, entry.sha256_before) if entry.sha256_before else None
                )
                if before is not None and after.startswith(before):
                    after = after[len(before) :]
                content = text_of(after[:MAX_TEXT], MAX_TEXT)
            ops.append(
                MemoryOpRecord(
                    op=f"bash-{entry.op}",
                    path=f"/mnt/memory/workflow/{entry.path}",
                    content=content,
                    store="workflow",
                )
            )
        return tuple(ops)

    @activity.defn(name=DREAM_CONSOLIDATE)
    async def consolidate(self, request: ConsolidateRequest) -> ConsolidateResult:
        target, work, workflow_id = self._scope()
        target_store = StoreRef(StoreKind.WORKFLOW, target)
        memory, versions = await asyncio.to_thread(read_memory, self.stores, target_store)
        context = DreamContext(target=target, workflow_id=workflow_id, memory=memory)
        counter = _Counter()
        batch_files = [work / "batches" / f"{i:06d}.jsonl" for i in range(request.batches)]
        runs = counter.wrap(_stream_records(batch_files))
        notes = await _with_heartbeats(
            asyncio.to_thread(self.consolidator.consolidate, context, runs),
            lambda: {"runs_read": counter.count},
        )
        own = StoreRef(StoreKind.WORKFLOW, DREAMING_DEFINITION_ID)
        scope = self._dream_scope()
        refs: list[NoteRef] = []
        for index, note in enumerate(notes):
            target_path = _check_note_path(note.path)
            path = f"{target}/{target_path}"
            data = note.content.encode("utf-8")
            written = await asyncio.to_thread(
                self.stores.write, own, path, data, provenance=self._provenance(scope, index)
            )
            assert written.content_sha256 is not None
            refs.append(
                NoteRef(
                    path=path,
                    target_path=target_path,
                    sha256=written.content_sha256,
                    base_sha256=versions.get(target_path),
                    bytes=len(data),
                )
            )
        return ConsolidateResult(runs=counter.count, notes=tuple(refs))

    @activity.defn(name=DREAM_PROMOTE)
    async def promote(self, request: PromoteRequest) -> PromotionOutcome:
        scope = self._dream_scope()
        target, _, workflow_id = self._scope()
        own = StoreRef(StoreKind.WORKFLOW, DREAMING_DEFINITION_ID)
        target_store = StoreRef(StoreKind.WORKFLOW, target)
        promoted: list[str] = []
        conflicts: list[str] = []
        for index, note in enumerate(request.notes):
            current = await asyncio.to_thread(self.stores.read, own, note.path)
            if not current.exists or current.content_sha256 != note.sha256:
                conflicts.append(
                    f"{note.path}: the note in {DREAMING_DEFINITION_ID}'s store changed since "
                    f"{workflow_id} wrote it (another dream of {target}?); run a new dream"
                )
                continue
            try:
                await asyncio.to_thread(
                    self.stores.write,
                    target_store,
                    note.target_path,
                    current.content.encode("utf-8"),
                    provenance=self._provenance(scope, index, actor=request.decision.who),
                    if_sha256=note.base_sha256 or ABSENT,
                )
            except ApplicationError as err:
                if err.type not in NON_RETRYABLE:
                    raise
                # A conflict (an edit since the dream read the target), a quota or a
                # scan refusal: reported, and nothing is overwritten.
                conflicts.append(f"{target_store}:{note.target_path}: {err.message}")
                continue
            promoted.append(note.target_path)
        return PromotionOutcome(promoted=tuple(promoted), conflicts=tuple(conflicts))


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


T = TypeVar("T")


async def _with_heartbeats(
    work: Awaitable[T], details: Callable[[], object], every: float = 5.0
) -> T:
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every)
        if done:
            return task.result()
        activity.heartbeat(details())


def read_memory(stores: MemoryStores, store: StoreRef) -> tuple[dict[str, str], dict[str, str]]:
    """The store's UTF-8 text files (bounded) and every file's sha256, by relative path,
    read through the stores' own (link-refusing) reads."""
    texts: dict[str, str] = {}
    versions: dict[str, str] = {}
    total = 0
    for entry in stores.list_files(store).entries:
        if entry.kind != "file":
            continue
        current = stores.read(store, entry.path)
        if not current.exists or current.content_sha256 is None:
            continue
        versions[entry.path] = current.content_sha256
        if entry.size > _MAX_MEMORY_FILE or total + entry.size > _MAX_MEMORY_TOTAL:
            continue
        if "\ufffd" in current.content:
            continue  # not UTF-8 text: nothing a consolidator can read
        texts[entry.path] = current.content
        total += entry.size
    return texts, versions
