"""The activities of ``lw.Dreaming``: claim and extract runs, consolidate (without a
model), propose, show, promote and release."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from temporalio import activity

from .._config import LwConfig
from .._ids import (
    PLANNER_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    Role,
)
from .._scope import StoreRef
from ..errors._kinds import INVALID_REQUEST, INVALID_WORKFLOW_ID, lw_error
from ..memory._fs import write_atomic
from ..memory._records import AuditEntry
from ..memory._stores import MemoryStores
from ._consolidator import Consolidation, Consolidator, DefaultConsolidator, DreamContext
from ._history import extract_run, text_of
from ._promotion import Dream, promote, recorded_decision
from ._reading import (
    _advance,
    _bash_changes,
    _Counter,
    _is_run_of,
    _stream_records,
    _with_heartbeats,
)
from ._records import (
    DREAM_CONSOLIDATE,
    DREAM_EXTRACT,
    DREAM_FIND_RUNS,
    DREAM_PROMOTE,
    DREAM_PROPOSE,
    DREAM_RELEASE,
    DREAM_SHOW,
    MAX_CHANGES,
    MAX_TEXT,
    ConsolidateRequest,
    ConsolidateResult,
    Cursor,
    ExtractRequest,
    ExtractResult,
    FileChange,
    FindRunsRequest,
    FindRunsResult,
    MemoryOpRecord,
    PromoteRequest,
    PromotionOutcome,
    ProposeRequest,
    ProposeResult,
    ReleaseRequest,
    RunRecord,
    ShowRequest,
    ShowResult,
)
from ._review import read_memory, render_diff, sources_of
from ._runfile import render_run, run_file_name


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
        consolidator: writes the notes when the worker has no model (default
            :class:`DefaultConsolidator`).
        stores: the memory stores' admin API (versions, compare-and-set, audit); the
            plugin passes its own so every writer shares one set of locks.
        agent: the worker has a model, so the dreaming agent writes the notes.
        index_search_attributes: the server has ``LwDefinition``; runs are found by it.
    """

    def __init__(
        self,
        config: LwConfig,
        consolidator: Consolidator | None = None,
        stores: MemoryStores | None = None,
        *,
        agent: bool = False,
        index_search_attributes: bool = False,
    ) -> None:
        self.config = config
        self.consolidator: Consolidator = consolidator or DefaultConsolidator()
        self.stores = stores or MemoryStores.for_config(config)
        self.agent = agent
        self.index_search_attributes = index_search_attributes

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        """The activity callables to register on a worker."""
        return (
            self.find_runs,
            self.extract,
            self.consolidate,
            self.propose,
            self.show,
            self.promote,
            self.release,
        )

    async def _dream(self) -> Dream:
        scope = await self.config.activity_scope()
        if scope.role is not Role.DREAMING or scope.agent_id.definition_id is None:
            raise lw_error(
                INVALID_WORKFLOW_ID,
                f"workflow {scope.workflow_id!r}: dreaming activities run only in lw.Dreaming",
            )
        return Dream(scope, self.stores)

    # -- collecting ----------------------------------------------------------------------
    @activity.defn(name=DREAM_FIND_RUNS)
    async def find_runs(self, request: FindRunsRequest) -> FindRunsResult:
        """Claim the target's runs closed since its cursor (and any a timed-out dream
        gave back), and note what the dream reads: the target's versions, the runs."""
        dream = await self._dream()
        found_file = dream.work / "found.json"
        if found_file.exists():  # a retry: the claim is already made
            return FindRunsResult.model_validate_json(found_file.read_bytes())
        with dream.books.locked():
            cursor = dream.books.cursor()
            if cursor.close_time is None and request.since is not None:
                cursor = cursor.model_copy(update={"close_time": request.since})
            listed, running = await self._list_closed(dream, cursor, request)
            released = dream.books.take_released()
            claimed_ids = {item["workflow_id"] for item in released}
            fresh = [item for item in listed if item["workflow_id"] not in claimed_ids]
            room = max(request.max_runs - len(released), 0)
            taken, left = fresh[:room], fresh[room:]
            items = released + taken
            self._taint_from(dream, items)
            entries, audit_end = await asyncio.to_thread(
                dream.stores.audit_since, dream.target_store, cursor.audit_offset
            )
            hold = running | {item["workflow_id"] for item in left}
            changes, audit_offset = _bash_changes(
                entries, audit_end, {item["workflow_id"] for item in taken}, hold
            )
            for item in taken:  # released runs carry the changes read when first claimed
                item["bash_changes"] = [
                    e.model_dump(mode="json") for e in changes.get(item["workflow_id"], ())
                ]
            for batch, start in enumerate(range(0, len(items), request.batch_size)):
                write_atomic(
                    dream.inputs(batch),
                    json.dumps(items[start : start + request.batch_size]).encode(),
                )
            _, versions = await asyncio.to_thread(read_memory, dream.stores, dream.target_store)
            _, own_offset = await asyncio.to_thread(dream.stores.audit_since, dream.own, 0)
            dream.books.write(dream.workflow_id, "base.json", versions)
            dream.books.write(dream.workflow_id, "runs.json", [i["workflow_id"] for i in items])
            dream.books.write(dream.workflow_id, "own_offset.json", own_offset)
            result = FindRunsResult(
                runs=len(items),
                batches=-(-len(items) // request.batch_size),
                agent=self.agent,
            )
            write_atomic(found_file, result.model_dump_json().encode())
            dream.books.save_cursor(_advance(cursor, taken, audit_offset))
        return result

    def _taint_from(self, dream: Dream, items: list[dict[str, Any]]) -> None:
        """A dream of tainted runs reads what they did: it is tainted too (its notes
        say so in their provenance, and their promotion, a person's, is audited so)."""
        gate = self.stores.gate
        if gate is None:
            return
        for item in items:
            found = gate.book.status(str(item["workflow_id"]), materialize=False)
            if found is not None:
                reason = f"consolidates tainted run {found.workflow_id} ({found.reason})"
                gate.book.taint(dream.workflow_id, "tainted-memory", reason)
                return

    async def _list_closed(
        self, dream: Dream, cursor: Cursor, request: FindRunsRequest
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """The target's runs closed since ``cursor``, oldest first, and the IDs of its
        runs still going (their audit entries wait for a later dream)."""
        base = f"WorkflowType = '{PLANNER_WORKFLOW}'"
        if self.index_search_attributes:
            base += f" AND {SEARCH_ATTRIBUTE_DEFINITION} = '{dream.target}'"
        statuses = " OR ".join(f"ExecutionStatus = '{s}'" for s in request.statuses)
        query = f"{base} AND ({statuses})"
        if cursor.close_time is not None:
            query += f" AND CloseTime >= '{_visibility_time(cursor.close_time)}'"
        consumed = set(cursor.workflow_ids)
        client = activity.client()
        queue = activity.info().task_queue
        found: list[tuple[datetime, str, str, str]] = []
        seen = 0
        async for execution in client.list_workflows(query):
            seen += 1
            if seen % 500 == 0:
                activity.heartbeat({"listed": seen})
            if not _is_run_of(execution.id, dream.target):
                continue
            closed = execution.close_time
            if closed is None:
                continue
            if cursor.close_time is not None and (
                closed < cursor.close_time
                or (closed == cursor.close_time and execution.id in consumed)
            ):
                continue
            if not await self.config.callers.ran_here(
                client, execution.id, execution.run_id, execution.task_queue, queue
            ):
                continue  # a forged run, or a later run refused under a taken ID
            status = execution.status.name if execution.status is not None else "UNKNOWN"
            found.append((closed, execution.id, execution.run_id, status))
        found.sort()
        running = {
            execution.id
            async for execution in client.list_workflows(f"{base} AND ExecutionStatus = 'Running'")
            if _is_run_of(execution.id, dream.target)
        }
        listed = [
            {"close_time": c.isoformat(), "workflow_id": w, "run_id": r, "status": s}
            for c, w, r, s in found
        ]
        return listed, running

    @activity.defn(name=DREAM_EXTRACT)
    async def extract(self, request: ExtractRequest) -> ExtractResult:
        """Extract one batch of runs into records and run files. Each run's record is
        kept as it is made, so a retried batch resumes where the last attempt stopped."""
        dream = await self._dream()
        source = dream.inputs(request.batch)
        try:
            chunk = json.loads(source.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {dream.workflow_id!r}: no run list at {source}; {DREAM_FIND_RUNS} "
                "must run first",
            ) from None
        client = activity.client()
        done_dir = dream.work / "records" / f"{request.batch:06d}"
        lines: list[str] = []
        commands = failures = memory_ops = 0
        for index, item in enumerate(chunk):
            activity.heartbeat({"batch": request.batch, "done": index, "of": len(chunk)})
            done = done_dir / f"{index:06d}.json"
            if done.exists():
                record = RunRecord.model_validate_json(done.read_bytes())
            else:
                closed = datetime.fromisoformat(item["close_time"])
                record = await extract_run(
                    client, item["workflow_id"], item["run_id"], item["status"], closed
                )
                if item.get("bash_changes"):
                    entries = [AuditEntry.model_validate(e) for e in item["bash_changes"]]
                    extra = await asyncio.to_thread(self._bash_ops, dream.target_store, entries)
                    record = record.model_copy(update={"memory_ops": record.memory_ops + extra})
                write_atomic(
                    dream.runs_dir / run_file_name(record.workflow_id),
                    render_run(record).encode("utf-8"),
                )
                write_atomic(done, record.model_dump_json().encode())
            commands += len(record.commands)
            failures += len(record.failures)
            memory_ops += len(record.memory_ops)
            lines.append(record.model_dump_json())
        write_atomic(dream.batch_file(request.batch), ("\n".join(lines) + "\n").encode())
        return ExtractResult(
            runs=len(chunk), commands=commands, failures=failures, memory_ops=memory_ops
        )

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

    # -- notes without a model -------------------------------------------------------------
    @activity.defn(name=DREAM_CONSOLIDATE)
    async def consolidate(self, request: ConsolidateRequest) -> ConsolidateResult:
        """The model-free path: the consolidator writes the notes into dreaming's own
        store; its state waits beside the proposal for an approval."""
        dream = await self._dream()
        memory, _ = await asyncio.to_thread(read_memory, dream.stores, dream.target_store)
        context = DreamContext(
            target=dream.target,
            workflow_id=dream.workflow_id,
            memory=memory,
            state=dream.books.state(),
        )
        counter = _Counter()
        batch_files = [dream.batch_file(i) for i in range(request.batches)]
        runs = counter.wrap(_stream_records(batch_files))
        produced = await _with_heartbeats(
            asyncio.to_thread(self.consolidator.consolidate, context, runs),
            lambda: {"runs_read": counter.count},
        )
        result = produced if isinstance(produced, Consolidation) else Consolidation(produced)
        dream.books.write(dream.workflow_id, "state.json", result.state)
        for index, note in enumerate(result.notes):
            await asyncio.to_thread(
                self.stores.write,
                dream.own,
                _check_note_path(note.path),
                note.content.encode("utf-8"),
                provenance=dream.provenance(index),
            )
        return ConsolidateResult(runs=counter.count, notes=len(result.notes))

    # -- review ------------------------------------------------------------------------------
    @activity.defn(name=DREAM_PROPOSE)
    async def propose(self, request: ProposeRequest) -> ProposeResult:
        """The proposal: each file of dreaming's store for the target that this dream
        wrote (by its own commands, memory calls or consolidator) and that differs from
        the target's file as the dream read it."""
        dream = await self._dream()
        base: dict[str, str] = dream.books.read(dream.workflow_id, "base.json", {})
        runs: list[str] = dream.books.read(dream.workflow_id, "runs.json", [])
        offset: int = dream.books.read(dream.workflow_id, "own_offset.json", 0)
        entries, _ = await asyncio.to_thread(dream.stores.audit_since, dream.own, offset)
        touched = dict.fromkeys(
            e.path for _, e in entries if e.workflow_id == dream.workflow_id and e.path
        )
        changes: list[FileChange] = []
        for path in touched:
            current = await asyncio.to_thread(dream.stores.read, dream.own, path)
            if not current.exists or current.content_sha256 is None:
                continue
            if current.content_sha256 == base.get(path):
                continue
            sources, count = sources_of(current.content, runs)
            changes.append(
                FileChange(
                    path=path,
                    base_sha256=base.get(path),
                    sha256=current.content_sha256,
                    bytes=current.size,
                    sources=sources,
                    sources_count=count,
                )
            )
        saved = await asyncio.to_thread(dream.save_proposal, tuple(changes[:MAX_CHANGES]))
        return ProposeResult(changes=saved, changes_count=max(len(changes), len(saved)))

    @activity.defn(name=DREAM_SHOW)
    async def show(self, request: ShowRequest) -> ShowResult:
        dream = await self._dream()
        proposal = dream.saved_proposal()
        text = await asyncio.to_thread(
            render_diff, dream.target, dream.stores, dream.own, dream.target_store, proposal
        )
        full = dream.books.proposal(dream.workflow_id) / "diff.txt"
        write_atomic(full, text.encode("utf-8"))
        data = text.encode("utf-8")
        if len(data) <= request.max_bytes:
            return ShowResult(text=text, path=str(full))
        cut = data[: request.max_bytes].decode("utf-8", "ignore")
        return ShowResult(text=cut, truncated=True, path=str(full))

    @activity.defn(name=DREAM_PROMOTE)
    async def promote(self, request: PromoteRequest) -> PromotionOutcome:
        """Promote the dream's saved proposal as the reviewer's recorded decision says
        (``_promotion``): never a change list or an approver from the request."""
        dream = await self._dream()
        proposal = dream.saved_proposal()
        info = activity.info()
        decision = await recorded_decision(
            activity.client(), dream.workflow_id, info.workflow_run_id or "", request.update_id
        )
        return await promote(dream, proposal, decision)

    @activity.defn(name=DREAM_RELEASE)
    async def release(self, request: ReleaseRequest) -> None:
        """Give an unreviewed dream's runs back: the target's next dream reads them."""
        dream = await self._dream()
        items: list[dict[str, Any]] = []
        for batch in range(request.batches):
            try:
                items += json.loads(dream.inputs(batch).read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
        with dream.books.locked():
            dream.books.release(dream.workflow_id, items)
