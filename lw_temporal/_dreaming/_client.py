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
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from .._ids import DREAMING_WORKFLOW, InvalidWorkflowId, check_definition_id, parse_workflow_id
from .._schedules import create_interval_schedule
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
        states.append(result.state(execution.id))
    return states


async def show_dream(client: Client, workflow_id: str, *, max_bytes: int = 64 * 1024) -> ShowResult:
    """A dream's proposal as a unified diff per file, with the runs each note came
    from: rendered by the worker while the dream waits (the whole text is kept in its
    data dir); once the dream closed, its outcome and the diff it last showed, read
    from its history."""
    handle = client.get_workflow_handle(workflow_id, result_type=DreamResult)
    try:
        result: ShowResult = await handle.execute_update(
            UPDATE_SHOW, max_bytes, result_type=ShowResult
        )
    except RPCError as err:
        if err.status is not RPCStatusCode.NOT_FOUND:
            raise
        if (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
            raise  # (an unknown dream: describe has raised NOT_FOUND already)
        return await _closed_dream(client, workflow_id, max_bytes)
    return result


async def _closed_dream(client: Client, workflow_id: str, max_bytes: int) -> ShowResult:
    """What ``show`` says of a closed dream: its status, decision and promotion, then
    the diff its reviewer was shown (the last ``lw.dreaming.show`` result)."""
    handle = client.get_workflow_handle(workflow_id, result_type=DreamResult)
    outcome = await handle.result()
    lines = [f"# {workflow_id}: {outcome.status.value} (closed)"]
    if outcome.decision is not None:
        why = f": {outcome.decision.why}" if outcome.decision.why else ""
        lines.append(f"# decided by {outcome.decision.who}{why}")
    if outcome.promotion is not None:
        for label, paths in (
            ("promoted", outcome.promotion.promoted),
            ("dropped", outcome.promotion.dropped),
        ):
            lines += [f"# {label} {outcome.target}/{path}" for path in paths]
    shown = await _last_shown(client, workflow_id)
    if shown is None:
        lines.append("# its proposal was never shown; the changes it proposed:")
        for change in outcome.changes:
            kind = "new" if change.base_sha256 is None else "changed"
            lines.append(f"#   {kind} {outcome.target}/{change.path} ({change.bytes} bytes)")
    head = "\n".join(lines) + "\n"
    text = head + (shown.text if shown else "")
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
    """Promote a waiting dream's changes (or only the paths in ``only``) into its
    target's memory, audited as ``who``. A conflict promotes nothing; the dream waits."""
    outcome: PromotionOutcome = await client.get_workflow_handle(workflow_id).execute_update(
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
    """The dream's state once it waits for a reviewer or has closed without a proposal."""
    handle = client.get_workflow_handle(workflow_id)
    waiting = {DreamStatus.AWAITING_APPROVAL, DreamStatus.NOTHING_NEW}

    async def poll() -> DreamState:
        while True:
            state: DreamState = await handle.query(QUERY_STATE, result_type=DreamState)
            if state.status in waiting:
                return state
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), within.total_seconds())
