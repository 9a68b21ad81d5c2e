"""The Schedule that starts dreams, and the reviewer's client calls."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from .._failures import failure_message
from .._ids import DREAMING_WORKFLOW, InvalidWorkflowId, check_definition_id, parse_workflow_id
from .._schedules import create_interval_schedule
from .._scope import StoreKind, StoreRef
from ..memory._stores import MemoryStores
from ._records import (
    DREAM_SHOW,
    QUERY_STATE,
    SCHEDULED_TOKEN,
    UPDATE_APPROVE,
    UPDATE_REJECT,
    UPDATE_SHOW,
    Decision,
    DreamInput,
    DreamOptions,
    DreamResult,
    DreamState,
    DreamStatus,
    PromotionOutcome,
    ShowResult,
)
from ._review import render_diff

#: Dreams a listing shows at most.
LIST_LIMIT = 500


def dream_schedule_id(definition_id: str) -> str:
    """The Schedule ID a target's dreaming gets unless one is given: one schedule per
    target, which ``lw-temporal dream`` finds by the definition id alone."""
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

    Overlap is ALLOW_ALL: a dream waiting for its reviewer does not hold back the
    next one. Each dream claims only runs no other dream of the target claimed, so
    waiting proposals never repeat each other, and one with nothing new closes at
    once. The scheduled workflow ID is ``dream_<definition>@scheduled`` plus the time
    the Schedule appends.
    """
    check_definition_id(definition_id)
    if every <= timedelta(0):
        raise ValueError(f"dreaming interval must be positive, got {every}")
    return await create_interval_schedule(
        client,
        schedule_id or dream_schedule_id(definition_id),
        workflow=DREAMING_WORKFLOW,
        arg=DreamInput(target=definition_id, options=options or DreamOptions()),
        workflow_id=f"dream_{definition_id}@{SCHEDULED_TOKEN}",
        task_queue=task_queue,
        every=every,
        trigger_immediately=trigger_immediately,
        overlap=ScheduleOverlapPolicy.ALLOW_ALL,
    )


async def list_dreams(
    client: Client,
    *,
    running_only: bool = True,
    task_queue: str | None = None,
    query_timeout: timedelta = timedelta(seconds=10),
) -> list[DreamState]:
    """The dreams known to visibility, with their live state where they still run.

    ``task_queue`` narrows the list to the dreams of one deployment when several share a
    namespace.
    """
    query = f"WorkflowType = '{DREAMING_WORKFLOW}'"
    if running_only:
        query += " AND ExecutionStatus = 'Running'"
    if task_queue is not None:
        if not task_queue or "'" in task_queue or "\\" in task_queue:
            raise ValueError(
                f"task queue {task_queue!r} cannot be listed: give a non-empty name without "
                "quotes or backslashes"
            )
        query += f" AND TaskQueue = '{task_queue}'"
    states: list[DreamState] = []
    async for execution in client.list_workflows(query, limit=LIST_LIMIT):
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
            # Listed under the ID that answered (a workflow named like lw's on another
            # worker could name a real dream, and a reviewer approve that one).
            states.append(state.model_copy(update={"workflow_id": execution.id}))
            continue
        states.append(await _closed_state(client, execution.id, execution.run_id))
    return states


async def _closed_state(client: Client, workflow_id: str, run_id: str | None) -> DreamState:
    """A closed dream as its result tells it, or, failed, why (from its history)."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id, result_type=DreamResult)
    try:
        result: DreamResult = await handle.result()
    except (WorkflowFailureError, RPCError, ValueError, TypeError) as err:
        why = (
            await failure_message(client, workflow_id)
            if isinstance(err, WorkflowFailureError)
            else f"its result cannot be read: {err}"
        )
        try:
            target = parse_workflow_id(workflow_id).definition_id or ""
        except InvalidWorkflowId:
            target = ""
        return DreamState(
            workflow_id=workflow_id, target=target, status=DreamStatus.FAILED, failure=why
        )
    return result.state(workflow_id)


async def show_dream(
    client: Client,
    workflow_id: str,
    *,
    max_bytes: int = 64 * 1024,
    stores: MemoryStores | None = None,
) -> ShowResult:
    """A dream's proposal as a unified diff per file, with the runs each note came from.

    A running dream's worker renders it (the whole text is kept in its data dir). A
    decided or closed dream is read from its history: its outcome and decision, then the
    diff its reviewer was last shown; one never shown is rendered here from ``stores``
    (the data dir's memory stores, where the proposed versions are kept) when given."""
    handle = client.get_workflow_handle(workflow_id)
    if (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
        result: ShowResult = await handle.execute_update(
            UPDATE_SHOW, max_bytes, result_type=ShowResult
        )
        return result
    return await _closed_dream(client, workflow_id, max_bytes, stores)


def proposal_path(target: str, paths: Sequence[str], given: str) -> str:
    """The proposal's path that ``given`` names, in any form a reviewer is shown: the
    path in the target (``consolidated.md``), with the target (``candidate-review/
    consolidated.md``), or as a diff header names it (``b/candidate-review/...``);
    ``given`` itself when it names none (the approval then reports it)."""
    if given in paths:
        return given
    text = given.strip()
    for prefix in ("b/", "a/", "/mnt/memory/workflow/", f"{target}/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            if text in paths:
                return text
    return given


async def _closed_dream(
    client: Client, workflow_id: str, max_bytes: int, stores: MemoryStores | None
) -> ShowResult:
    """What ``show`` says of a closed dream: its status, decision and promotion (or why
    it failed), then the diff its reviewer was shown (the last ``lw.dreaming.show``
    result), or, never shown, its changes (rendered from ``stores`` when given)."""
    state = await _closed_state(client, workflow_id, None)
    lines = [f"# {workflow_id}: {state.status.value} (closed)"]
    if state.failure:
        lines.append(f"# failed: {state.failure}")
    if state.decision is not None:
        why = f": {state.decision.why}" if state.decision.why else ""
        lines.append(f"# decided by {state.decision.who}{why}")
    if state.promotion is not None:
        for label, paths in (
            ("promoted", state.promotion.promoted),
            ("dropped", state.promotion.dropped),
        ):
            lines += [f"# {label} {state.target}/{path}" for path in paths]
    shown = await _last_shown(client, workflow_id)
    if shown is None and state.changes:
        lines.append("# its proposal was never shown; the changes it proposed:")
        for change in state.changes:
            kind = "new" if change.base_sha256 is None else "changed"
            lines.append(f"#   {kind} {state.target}/{change.path} ({change.bytes} bytes)")
    text = "\n".join(lines) + "\n"
    if shown is not None:
        text += shown.text
    elif stores is not None and state.changes:
        text += render_diff(
            state.target,
            stores,
            StoreRef(StoreKind.DREAMING, state.target),
            StoreRef(StoreKind.WORKFLOW, state.target),
            state.changes,
        )
    data = text.encode("utf-8")
    cut = len(data) > max_bytes
    if cut:
        text = data[:max_bytes].decode("utf-8", "ignore")
    return ShowResult(
        text=text,
        truncated=cut or (shown is not None and shown.truncated),
        path=shown.path if shown else "",
    )


async def _last_shown(client: Client, workflow_id: str) -> ShowResult | None:
    """The result of the dream's last completed ``lw.dreaming.show`` activity."""
    shows: set[int] = set()
    last: Payloads | None = None
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == DREAM_SHOW:
                shows.add(event.event_id)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            if attributes.scheduled_event_id in shows:
                last = attributes.result
    if last is None or not last.payloads:
        return None
    decoded = await client.data_converter.decode(last.payloads, [ShowResult])
    shown: ShowResult = decoded[0]
    return shown


async def approve_dream(
    client: Client, workflow_id: str, who: str, why: str, *, only: Sequence[str] = ()
) -> PromotionOutcome:
    """Promote a waiting dream's changes (or only the paths in ``only``, in any form
    :func:`proposal_path` reads) into its target's memory, audited as ``who``. A
    conflict promotes nothing; the dream waits."""
    handle = client.get_workflow_handle(workflow_id)
    if only:
        state: DreamState = await handle.query(QUERY_STATE, result_type=DreamState)
        paths = [change.path for change in state.changes]
        only = [proposal_path(state.target, paths, path) for path in only]
    outcome: PromotionOutcome = await handle.execute_update(
        UPDATE_APPROVE, Decision(who=who, why=why, only=tuple(only)), result_type=PromotionOutcome
    )
    return outcome


async def reject_dream(client: Client, workflow_id: str, who: str, why: str) -> DreamStatus:
    """Close a waiting dream without touching its target."""
    status: DreamStatus = await client.get_workflow_handle(workflow_id).execute_update(
        UPDATE_REJECT, Decision(who=who, why=why), result_type=DreamStatus
    )
    return status


async def wait_for_review(
    client: Client, workflow_id: str, *, within: timedelta = timedelta(minutes=10)
) -> DreamState:
    """The dream's state once it waits for a reviewer or has closed (without a proposal,
    or decided)."""
    handle = client.get_workflow_handle(workflow_id)
    waiting = {
        DreamStatus.AWAITING_APPROVAL,
        DreamStatus.NOTHING_NEW,
        DreamStatus.APPROVED,
        DreamStatus.REJECTED,
        DreamStatus.TIMED_OUT,
    }

    async def poll() -> DreamState:
        while True:
            state: DreamState = await handle.query(QUERY_STATE, result_type=DreamState)
            if state.status in waiting:
                return state
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), within.total_seconds())
