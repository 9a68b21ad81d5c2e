"""Dreaming: consolidate many finished runs of one definition into reviewed memory.

``lw.Dreaming`` (ID ``dream_<target>@<token>``) reads the Temporal histories of the
target's planner runs that closed since the last dream, extracts what happened (tool
calls, commands and exit codes, failures, memory mutations), reads the target's memory,
and lets a :class:`Consolidator` write notes into dreaming's own store
(``memory/workflows/memory.dreaming/<target>/``). Nothing reaches the target's memory
until a human approves through the ``approve`` update; the copy then goes through the
store's compare-and-set, so an edit made to the target since the dream read it is
reported as a conflict instead of being overwritten.

The workflow history stays small whatever the number of runs: the run list and the
extracted records live in files in the dream's own scratch, and activities pass batch
numbers and note references, never the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from ._definitions import sha256_hex
from ._errors import (
    INVALID_REQUEST,
    INVALID_WORKFLOW_ID,
    NON_RETRYABLE,
    lw_error,
)
from ._ids import (
    DREAMING_DEFINITION_ID,
    DREAMING_WORKFLOW,
    PLANNER_WORKFLOW,
    InvalidWorkflowId,
    Role,
    check_definition_id,
    parse_workflow_id,
    parse_workflow_id_for_type,
)
from ._scope import StoreKind, StoreRef

with workflow.unsafe.imports_passed_through():
    from temporalio.client import (
        Client,
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleHandle,
        ScheduleIntervalSpec,
        ScheduleOverlapPolicy,
        SchedulePolicy,
        ScheduleSpec,
        WorkflowExecutionStatus,
        WorkflowQueryFailedError,
    )
    from temporalio.service import RPCError

    from ._config import LwConfig
    from ._memory import ABSENT, AuditEntry, MemoryStores, Provenance
    from ._scope import Scope

DREAM_FIND_RUNS = "lw.dreaming.find_runs"
DREAM_EXTRACT = "lw.dreaming.extract"
DREAM_CONSOLIDATE = "lw.dreaming.consolidate"
DREAM_PROMOTE = "lw.dreaming.promote"

UPDATE_APPROVE = "approve"
UPDATE_REJECT = "reject"
QUERY_STATE = "state"

#: The token scheduled dreams start with; the Schedule appends ``-<time>``.
SCHEDULED_TOKEN = "scheduled"

# Bounds that keep one run's record, and so every batch file, finite.
_MAX_TEXT = 2_000
_MAX_COMMAND = 300
_MAX_ITEMS_PER_RUN = 2_000
_MAX_CHILDREN = 1_000
_MAX_MEMORY_FILE = 1024 * 1024
_MAX_MEMORY_TOTAL = 32 * 1024 * 1024


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- workflow input, state and result ---------------------------------------------------


_CLOSED_STATUSES = frozenset(
    {"Completed", "Failed", "TimedOut", "Terminated", "Canceled", "ContinuedAsNew"}
)


class DreamOptions(_Model):
    """How much one dream reads and how long it waits for a reviewer."""

    max_runs: int = Field(default=500, gt=0, le=100_000)
    batch_size: int = Field(default=50, gt=0, le=1_000)
    approval_timeout: timedelta = timedelta(days=7)
    #: Visibility statuses of the target's runs worth learning from.
    statuses: tuple[str, ...] = Field(default=("Completed", "Failed"), min_length=1)
    #: Lower bound on close time for a dream with no previous completion (a first,
    #: unscheduled dream); later scheduled dreams use the last completion's cursor.
    since: datetime | None = None

    @field_validator("statuses")
    @classmethod
    def _statuses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - _CLOSED_STATUSES)
        if unknown:
            raise ValueError(
                f"statuses {unknown} are not closed execution statuses; use some of "
                f"{sorted(_CLOSED_STATUSES)}"
            )
        return value


class DreamInput(_Model):
    target: str
    options: DreamOptions = DreamOptions()


class Cursor(_Model):
    """Where the last dream stopped: the newest close time it consumed, and the runs
    that closed at exactly that time (so a tie is neither skipped nor read twice)."""

    close_time: datetime
    workflow_ids: tuple[str, ...] = ()


class NoteRef(_Model):
    """One note a dream wrote: where it is in dreaming's store, where approval copies
    it in the target's store, and the target file's version the dream saw."""

    path: str
    target_path: str
    sha256: str
    base_sha256: str | None
    bytes: int


class Decision(_Model):
    who: str = Field(min_length=1, max_length=200)
    why: str = Field(default="", max_length=2_000)


class PromotionOutcome(_Model):
    promoted: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


class DreamStatus(StrEnum):
    COLLECTING = "collecting"
    CONSOLIDATING = "consolidating"
    AWAITING_APPROVAL = "awaiting-approval"
    PROMOTING = "promoting"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed-out"
    NOTHING_NEW = "nothing-new"
    #: Listing only: the dream runs but no worker answered its state query.
    UNREACHABLE = "unreachable"


class DreamState(_Model):
    workflow_id: str
    target: str
    status: DreamStatus
    runs: int = 0
    notes: tuple[NoteRef, ...] = ()
    decision: Decision | None = None
    promotion: PromotionOutcome | None = None
    approval_deadline: datetime | None = None


class DreamResult(_Model):
    target: str
    status: DreamStatus
    #: The cursor the next dream starts from (the Schedule hands it over as the
    #: last completion result).
    cursor: Cursor | None
    runs: int = 0
    notes: tuple[NoteRef, ...] = ()
    decision: Decision | None = None
    promotion: PromotionOutcome | None = None


# -- activity requests and results ------------------------------------------------------


class FindRunsRequest(_Model):
    cursor: Cursor | None
    max_runs: int
    batch_size: int
    statuses: tuple[str, ...]


class FindRunsResult(_Model):
    runs: int
    batches: int
    cursor: Cursor | None


class ExtractRequest(_Model):
    batch: int = Field(ge=0)
    batch_size: int = Field(gt=0)


class ExtractResult(_Model):
    runs: int
    commands: int
    failures: int
    memory_ops: int


class ConsolidateRequest(_Model):
    batches: int = Field(ge=0)


class ConsolidateResult(_Model):
    runs: int
    notes: tuple[NoteRef, ...]


class PromoteRequest(_Model):
    notes: tuple[NoteRef, ...]
    decision: Decision


# -- what the consolidator sees ------------------------------------------------------------


class CommandRecord(_Model):
    command: str
    exit_code: int | None = None
    rejection: str | None = None


class FailureRecord(_Model):
    #: ``activity:<type>`` or ``workflow:<type>``.
    source: str
    message: str


class MemoryOpRecord(_Model):
    op: str
    path: str | None = None
    content: str | None = None
    store: str | None = None


class RunRecord(_Model):
    """What one finished run did, extracted from its history and its steps' histories."""

    workflow_id: str
    run_id: str
    status: str
    close_time: datetime | None
    tool_calls: int = 0
    commands: tuple[CommandRecord, ...] = ()
    failures: tuple[FailureRecord, ...] = ()
    memory_ops: tuple[MemoryOpRecord, ...] = ()
    truncated: bool = False


@dataclass(frozen=True)
class Note:
    """A consolidator's output: a file for the target's store, by relative path."""

    path: str
    content: str


@dataclass(frozen=True)
class DreamContext:
    target: str
    workflow_id: str
    #: The target store's text files (relative path -> content), bounded in size.
    memory: Mapping[str, str] = field(default_factory=dict)


class Consolidator(Protocol):
    """Turns the records of many runs plus the target's memory into notes.

    ``runs`` is an iterator streamed from disk: a consolidator that keeps only
    aggregates costs memory in proportion to what it learns, not to the number of runs.
    It runs in a worker thread and must be deterministic if dreams are to be
    reproducible.
    """

    def consolidate(self, context: DreamContext, runs: Iterator[RunRecord]) -> list[Note]: ...


# -- the default consolidator ----------------------------------------------------------------

_STATE_MARK = "<!-- lw-dreaming-state:"
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SPACE = re.compile(r"\s+")


def _normalize(line: str) -> str:
    return _SPACE.sub(" ", _BULLET.sub("", line)).strip()


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _oneline(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Tally:
    """Counts of distinct runs per key, with the first-seen display form."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.shown: dict[str, str] = {}

    def add(self, key: str, shown: str, count: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + count
        self.shown.setdefault(key, shown)

    def top(self, limit: int, minimum: int = 1) -> list[tuple[str, int]]:
        items = [(k, c) for k, c in self.counts.items() if c >= minimum]
        items.sort(key=lambda kc: (-kc[1], kc[0]))
        return [(self.shown[k], c) for k, c in items[:limit]]

    def dump(self, limit: int) -> list[list[object]]:
        items = sorted(self.counts.items(), key=lambda kc: (-kc[1], kc[0]))[:limit]
        return [[k, self.shown[k], c] for k, c in items]

    def load(self, rows: object) -> None:
        if not isinstance(rows, list):
            return
        for row in rows:
            if (
                isinstance(row, list)
                and len(row) == 3
                and isinstance(row[0], str)
                and isinstance(row[1], str)
                and isinstance(row[2], int)
            ):
                self.add(row[0], row[1], row[2])


class DefaultConsolidator:
    """Deterministic notes: de-duplicated lessons, recurring failures with counts, and
    commands that worked, each counted in runs.

    Lessons are the lines the runs wrote into the target's workflow memory. The note
    is cumulative: it carries its tallies in a trailing comment, and a dream adds its
    runs to the tallies of the note already promoted into the target's memory.
    """

    NOTE_PATH = "dreaming/consolidated.md"

    def __init__(self, *, min_failure_runs: int = 2, shown: int = 50, kept: int = 500) -> None:
        self.min_failure_runs = min_failure_runs
        self.shown = shown
        self.kept = kept

    def consolidate(self, context: DreamContext, runs: Iterator[RunRecord]) -> list[Note]:
        lessons, failures, worked = _Tally(), _Tally(), _Tally()
        total = 0
        previous = context.memory.get(self.NOTE_PATH)
        if previous is not None and _STATE_MARK in previous:
            raw = previous.rsplit(_STATE_MARK, 1)[1].split("-->", 1)[0]
            with contextlib.suppress(ValueError):
                state = json.loads(raw)
                if isinstance(state, dict):
                    total = int(state.get("runs", 0))
                    lessons.load(state.get("lessons"))
                    failures.load(state.get("failures"))
                    worked.load(state.get("worked"))
        new_runs = 0
        for run in runs:
            new_runs += 1
            seen_lessons: dict[str, str] = {}
            seen_failures: dict[str, str] = {}
            seen_worked: dict[str, str] = {}
            for op in run.memory_ops:
                if op.content is None or op.op in ("read", "list", "delete"):
                    continue
                if op.store is not None and op.store != "workflow":
                    continue
                for line in op.content.splitlines():
                    text = _normalize(line)
                    if len(text) < 3 or text.startswith("#") or text.startswith(_STATE_MARK):
                        continue
                    seen_lessons.setdefault(text.casefold(), text)
            for cmd in run.commands:
                command = _oneline(cmd.command, _MAX_COMMAND)
                if cmd.rejection:
                    shown = f"`{command}` was refused: {_oneline(cmd.rejection, 160)}"
                    seen_failures.setdefault(f"refused\0{command}", shown)
                elif cmd.exit_code == 0:
                    seen_worked.setdefault(command, f"`{command}`")
                elif cmd.exit_code is not None:
                    shown = f"`{command}` exited {cmd.exit_code}"
                    seen_failures.setdefault(f"exit\0{command}\0{cmd.exit_code}", shown)
            for failure in run.failures:
                message = _oneline(failure.message, 200)
                seen_failures.setdefault(
                    f"{failure.source}\0{message}", f"{failure.source} failed: {message}"
                )
            for key, shown in seen_lessons.items():
                lessons.add(key, shown)
            for key, shown in seen_failures.items():
                failures.add(key, shown)
            for key, shown in seen_worked.items():
                worked.add(key, shown)
        total += new_runs
        state = {
            "runs": total,
            "lessons": lessons.dump(self.kept),
            "failures": failures.dump(self.kept),
            "worked": worked.dump(self.kept),
        }
        lines = [
            f"# Dreaming notes for {context.target}",
            "",
            f"Consolidated from {total} finished runs ({new_runs} new in "
            f"{context.workflow_id}). Counts are numbers of runs.",
            "",
            "## Lessons",
            "",
        ]
        lines += [
            f"- {text}" + (f" ({n} runs)" if n > 1 else "") for text, n in lessons.top(self.shown)
        ] or ["- (none recorded)"]
        lines += ["", "## Recurring failures", ""]
        lines += [
            f"- {_runs(n)}: {text}" for text, n in failures.top(self.shown, self.min_failure_runs)
        ] or ["- (none)"]
        lines += ["", "## Commands that worked", ""]
        lines += [f"- {_runs(n)}: {text}" for text, n in worked.top(self.shown)] or ["- (none)"]
        body = "\n".join(lines)
        state_json = json.dumps(state, sort_keys=True, separators=(",", ":"))
        # "--" cannot appear inside an HTML comment; escape it in the JSON.
        state_json = state_json.replace("--", "-\\u002d")
        return [Note(self.NOTE_PATH, f"{body}\n\n{_STATE_MARK}{state_json}-->\n")]


# -- history extraction ---------------------------------------------------------------------

Decode = Callable[[Any], Awaitable[list[Any]]]


def _first(value: Any, keys: Sequence[str]) -> Any:
    if isinstance(value, Mapping):
        for key in keys:
            if key in value and value[key] is not None:
                return value[key]
    return None


def _text(value: Any, limit: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit]


class _RunExtract:
    def __init__(self) -> None:
        self.tool_calls = 0
        self.commands: list[CommandRecord] = []
        self.failures: list[FailureRecord] = []
        self.memory_ops: list[MemoryOpRecord] = []
        self.truncated = False

    def room(self) -> bool:
        if len(self.commands) + len(self.failures) + len(self.memory_ops) >= _MAX_ITEMS_PER_RUN:
            self.truncated = True
            return False
        return True


def _store_of(path: str | None) -> str | None:
    """The kind of store a virtual memory path names (``/mnt/memory/<kind>/...``)."""
    if path is None:
        return None
    parts = PurePosixPath(path).parts
    if len(parts) >= 4 and parts[:3] == ("/", "mnt", "memory"):
        return parts[3]
    return None


async def _decode_first(decode: Decode, payloads: Any) -> Any:
    if payloads is None or not payloads.payloads:
        return None
    try:
        values = await decode(payloads.payloads)
    except Exception:
        return None
    return values[0] if values else None


async def _extract_history(events: Sequence[Any], decode: Decode, out: _RunExtract) -> list[str]:
    """Fold one history into ``out``; return the IDs of the child workflows it started."""
    scheduled: dict[int, tuple[str, Any]] = {}
    children: list[str] = []
    for event in events:
        kind = event.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            attrs = event.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name
            if name.startswith("lw.bash") or name.startswith("lw.memory."):
                arg = await _decode_first(decode, attrs.input)
            else:
                arg = None
            scheduled[event.event_id] = (name, arg)
            out.tool_calls += 1
        elif kind == "activity_task_completed_event_attributes":
            attrs = event.activity_task_completed_event_attributes
            name, arg = scheduled.pop(attrs.scheduled_event_id, ("", None))
            if not out.room():
                continue
            if name == "lw.bash":
                result = await _decode_first(decode, attrs.result)
                command = _text(_first(arg, ("command",)), _MAX_COMMAND) or ""
                exit_code = _first(result, ("exit_code",))
                rejection = _first(result, ("rejection",))
                out.commands.append(
                    CommandRecord(
                        command=command,
                        exit_code=exit_code if isinstance(exit_code, int) else None,
                        rejection=_text(rejection, 300),
                    )
                )
            elif name.startswith("lw.memory."):
                op = name.removeprefix("lw.memory.")
                path = _text(_first(arg, ("path",)), 300)
                store = _store_of(path)
                out.memory_ops.append(
                    MemoryOpRecord(
                        op=op,
                        path=path,
                        content=_text(
                            _first(arg, ("content", "new", "text", "new_str", "file_text")),
                            _MAX_TEXT,
                        ),
                        store=store,
                    )
                )
        elif kind in (
            "activity_task_failed_event_attributes",
            "activity_task_timed_out_event_attributes",
        ):
            attrs = getattr(event, kind)
            name, _ = scheduled.pop(attrs.scheduled_event_id, ("", None))
            if out.room():
                message = attrs.failure.message or "failed"
                if kind.startswith("activity_task_timed_out"):
                    message = f"timed out: {message}"
                out.failures.append(
                    FailureRecord(source=f"activity:{name}", message=_text(message, 500) or "")
                )
        elif kind == "workflow_execution_failed_event_attributes":
            attrs = event.workflow_execution_failed_event_attributes
            if out.room():
                out.failures.append(
                    FailureRecord(
                        source="workflow", message=_text(attrs.failure.message, 500) or ""
                    )
                )
        elif kind == "child_workflow_execution_started_event_attributes":
            if len(children) < _MAX_CHILDREN:
                children.append(
                    event.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
                )
            else:
                out.truncated = True
    return children


async def extract_run(
    client: Client, workflow_id: str, run_id: str, status: str, close_time: datetime | None
) -> RunRecord:
    """The record of one run: its own history plus its steps' (its child workflows')."""
    out = _RunExtract()

    async def decode(payloads: Any) -> list[Any]:
        return await client.data_converter.decode(payloads)

    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    history = await handle.fetch_history()
    children = await _extract_history(history.events, decode, out)
    for child in children:
        activity.heartbeat()
        try:
            child_history = await client.get_workflow_handle(child).fetch_history()
        except Exception:
            out.truncated = True
            continue
        await _extract_history(child_history.events, decode, out)
    return RunRecord(
        workflow_id=workflow_id,
        run_id=run_id,
        status=status,
        close_time=close_time,
        tool_calls=out.tool_calls,
        commands=tuple(out.commands),
        failures=tuple(out.failures),
        memory_ops=tuple(out.memory_ops),
        truncated=out.truncated,
    )


# -- activities ------------------------------------------------------------------------------


def _visibility_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _atomic_write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)


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
            _atomic_write(work / "inputs" / f"{batch:06d}.json", json.dumps(items))
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
        _atomic_write(work / "batches" / f"{request.batch:06d}.jsonl", "\n".join(lines) + "\n")
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
                if len(entries) < _MAX_ITEMS_PER_RUN:
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
                content = _text(after[:_MAX_TEXT], _MAX_TEXT)
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
        memory, versions = read_memory(target_store.path(self.config.layout))
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


def read_memory(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The store's UTF-8 text files (bounded) and every file's sha256, by relative path."""
    texts: dict[str, str] = {}
    versions: dict[str, str] = {}
    total = 0
    if not root.is_dir():
        return texts, versions
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".lw-tmp-") or path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            data = path.read_bytes()
            versions[rel] = sha256_hex(data)
            if len(data) > _MAX_MEMORY_FILE or total + len(data) > _MAX_MEMORY_TOTAL:
                continue
            try:
                texts[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            total += len(data)
    return texts, versions


# -- the workflow ----------------------------------------------------------------------------

_ACTIVITY_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=list(NON_RETRYABLE))


@workflow.defn(name=DREAMING_WORKFLOW)
class DreamingWorkflow:
    """One dream of one target: collect, consolidate, then wait for a human."""

    def __init__(self) -> None:
        self._target = ""
        self._status = DreamStatus.COLLECTING
        self._runs = 0
        self._notes: tuple[NoteRef, ...] = ()
        self._decision: Decision | None = None
        self._approved = False
        self._promotion: PromotionOutcome | None = None
        self._deadline: datetime | None = None

    @workflow.run
    async def run(self, request: DreamInput) -> DreamResult:
        info = workflow.info()
        try:
            run_id = parse_workflow_id_for_type(info.workflow_id, DREAMING_WORKFLOW)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
        if run_id.definition_id != request.target:
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {info.workflow_id!r} dreams of {run_id.definition_id!r} but its "
                f"input names {request.target!r}; start it as "
                f"dream_{request.target}@<token>",
            )
        self._target = request.target
        options = request.options
        last = (
            workflow.get_last_completion_result(DreamResult)
            if workflow.has_last_completion_result()
            else None
        )
        cursor = last.cursor if last is not None else None
        if cursor is None and options.since is not None:
            cursor = Cursor(close_time=options.since)

        found = await workflow.execute_activity(
            DREAM_FIND_RUNS,
            FindRunsRequest(
                cursor=cursor,
                max_runs=options.max_runs,
                batch_size=options.batch_size,
                statuses=options.statuses,
            ),
            result_type=FindRunsResult,
            start_to_close_timeout=timedelta(minutes=10),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=_ACTIVITY_RETRY,
        )
        if found.runs == 0:
            self._status = DreamStatus.NOTHING_NEW
            return self._result(cursor)
        for batch in range(found.batches):
            await workflow.execute_activity(
                DREAM_EXTRACT,
                ExtractRequest(batch=batch, batch_size=options.batch_size),
                result_type=ExtractResult,
                start_to_close_timeout=timedelta(minutes=30),
                heartbeat_timeout=timedelta(minutes=2),
                retry_policy=_ACTIVITY_RETRY,
            )
        self._status = DreamStatus.CONSOLIDATING
        consolidated = await workflow.execute_activity(
            DREAM_CONSOLIDATE,
            ConsolidateRequest(batches=found.batches),
            result_type=ConsolidateResult,
            start_to_close_timeout=timedelta(minutes=30),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=_ACTIVITY_RETRY,
        )
        self._runs = consolidated.runs
        self._notes = consolidated.notes

        self._status = DreamStatus.AWAITING_APPROVAL
        self._deadline = workflow.now() + options.approval_timeout
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._decision is not None,
                timeout=options.approval_timeout,
                timeout_summary="await approval",
            )
        decision = self._decision  # a decision accepted as the timer fired still counts
        if decision is None:
            # Unreviewed runs stay unconsumed: the next dream reads them again.
            self._status = DreamStatus.TIMED_OUT
            return self._result(cursor)
        if not self._approved:
            self._status = DreamStatus.REJECTED
            return self._result(found.cursor)
        self._status = DreamStatus.PROMOTING
        self._promotion = await workflow.execute_activity(
            DREAM_PROMOTE,
            PromoteRequest(notes=self._notes, decision=decision),
            result_type=PromotionOutcome,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=_ACTIVITY_RETRY,
        )
        self._status = DreamStatus.APPROVED
        # Let the approve update hand the outcome to the approver before closing.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result(found.cursor)

    def _result(self, cursor: Cursor | None) -> DreamResult:
        return DreamResult(
            target=self._target,
            status=self._status,
            cursor=cursor,
            runs=self._runs,
            notes=self._notes,
            decision=self._decision,
            promotion=self._promotion,
        )

    @workflow.query(name=QUERY_STATE)
    def state(self) -> DreamState:
        return DreamState(
            workflow_id=workflow.info().workflow_id,
            target=self._target,
            status=self._status,
            runs=self._runs,
            notes=self._notes,
            decision=self._decision,
            promotion=self._promotion,
            approval_deadline=self._deadline,
        )

    @workflow.update(name=UPDATE_APPROVE)
    async def approve(self, decision: Decision) -> PromotionOutcome:
        self._decision = decision
        self._approved = True
        await workflow.wait_condition(lambda: self._promotion is not None)
        assert self._promotion is not None
        return self._promotion

    @approve.validator
    def _validate_approve(self, decision: Decision) -> None:
        self._check_pending("approve")

    @workflow.update(name=UPDATE_REJECT)
    async def reject(self, decision: Decision) -> DreamStatus:
        self._decision = decision
        return DreamStatus.REJECTED

    @reject.validator
    def _validate_reject(self, decision: Decision) -> None:
        self._check_pending("reject")

    def _check_pending(self, verb: str) -> None:
        if self._status is not DreamStatus.AWAITING_APPROVAL or self._decision is not None:
            raise lw_error(
                INVALID_REQUEST,
                f"cannot {verb} dream {workflow.info().workflow_id!r}: it is "
                f"{self._status.value}, not awaiting approval",
            )


# -- schedules and the reviewer's client calls --------------------------------------------


def dream_schedule_id(definition_id: str) -> str:
    return f"lw-dream-{check_definition_id(definition_id)}"


async def schedule_dreaming(
    client: Client,
    definition_id: str,
    *,
    every: timedelta,
    task_queue: str,
    options: DreamOptions | None = None,
    schedule_id: str | None = None,
    trigger_immediately: bool = False,
) -> ScheduleHandle:
    """Create the Schedule that dreams of ``definition_id`` every ``every``.

    Overlap is SKIP: a dream still waiting for its reviewer holds back the next one,
    so the reviewer never sees two competing proposals for the same target. The
    scheduled workflow ID is ``dream_<definition>@scheduled`` plus the time the
    Schedule appends.
    """
    check_definition_id(definition_id)
    if every <= timedelta(0):
        raise ValueError(f"dreaming interval must be positive, got {every}")
    return await client.create_schedule(
        schedule_id or dream_schedule_id(definition_id),
        Schedule(
            action=ScheduleActionStartWorkflow(
                DREAMING_WORKFLOW,
                DreamInput(target=definition_id, options=options or DreamOptions()),
                id=f"dream_{definition_id}@{SCHEDULED_TOKEN}",
                task_queue=task_queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        ),
        trigger_immediately=trigger_immediately,
    )


async def list_dreams(
    client: Client,
    *,
    running_only: bool = True,
    query_timeout: timedelta = timedelta(seconds=10),
) -> list[DreamState]:
    """The dreams known to visibility, with their live state where they still run."""
    query = f"WorkflowType = '{DREAMING_WORKFLOW}'"
    if running_only:
        query += " AND ExecutionStatus = 'Running'"
    states: list[DreamState] = []
    async for execution in client.list_workflows(query):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        if execution.status is WorkflowExecutionStatus.RUNNING:
            try:
                state: DreamState = await handle.query(
                    QUERY_STATE, result_type=DreamState, rpc_timeout=query_timeout
                )
            except (RPCError, WorkflowQueryFailedError):
                # No worker polls its task queue (or it is busy): list it all the same.
                try:
                    target = parse_workflow_id(execution.id).definition_id or ""
                except InvalidWorkflowId:
                    target = ""
                state = DreamState(
                    workflow_id=execution.id, target=target, status=DreamStatus.UNREACHABLE
                )
            states.append(state)
            continue
        try:
            result = await client.get_workflow_handle(
                execution.id, run_id=execution.run_id, result_type=DreamResult
            ).result()
        except Exception:
            continue
        states.append(
            DreamState(
                workflow_id=execution.id,
                target=result.target,
                status=result.status,
                runs=result.runs,
                notes=result.notes,
                decision=result.decision,
                promotion=result.promotion,
            )
        )
    return states


async def approve_dream(client: Client, workflow_id: str, who: str, why: str) -> PromotionOutcome:
    """Promote a waiting dream's notes into its target's memory, audited as ``who``."""
    outcome: PromotionOutcome = await client.get_workflow_handle(workflow_id).execute_update(
        UPDATE_APPROVE, Decision(who=who, why=why), result_type=PromotionOutcome
    )
    return outcome


async def reject_dream(client: Client, workflow_id: str, who: str, why: str) -> DreamStatus:
    """Close a waiting dream without touching its target."""
    status: DreamStatus = await client.get_workflow_handle(workflow_id).execute_update(
        UPDATE_REJECT, Decision(who=who, why=why), result_type=DreamStatus
    )
    return status


__all__ = [
    "Consolidator",
    "DefaultConsolidator",
    "DreamContext",
    "DreamInput",
    "DreamOptions",
    "DreamResult",
    "DreamState",
    "DreamStatus",
    "DreamingActivities",
    "DreamingWorkflow",
    "Note",
    "RunRecord",
    "approve_dream",
    "list_dreams",
    "reject_dream",
    "schedule_dreaming",
]
