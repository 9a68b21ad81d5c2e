"""The reviewer's side: find the requests waiting across running lw workflows, and
decide one.

Pending requests live in each workflow's state, so a listing asks visibility for the
running lw workflows (of one tree with ``workflow_id``; of one task queue with
``task_queue``) and each of them for its ``lw.progress`` answer, a few at a time, each
within ``query_timeout``: it costs one query per running workflow, at most ``limit``
of them (the listing says when more were left out, and which workflows no worker
answered for). A decision is the ``lw.approvals.decide`` update, which the workflow's
validator accepts or refuses before anything enters its history.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import ValidationError
from temporalio.client import Client, WorkflowQueryFailedError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from .._ids import (
    DREAMING_WORKFLOW,
    ORCHESTRATOR_WORKFLOW,
    PLANNER_WORKFLOW,
    WORKER_WORKFLOW,
    InvalidWorkflowId,
    parse_workflow_id,
)
from .._privacy._codec import PayloadSealed
from ._records import DECIDE_UPDATE, ApprovalDecision, ApprovalRecord, ApprovalRequest

#: Running workflows one listing asks at most, and how many at once.
LIST_LIMIT = 500
#: How long a decision waits for a worker to accept (or refuse) it.
DECIDE_WAIT = timedelta(seconds=60)
_CONCURRENT_QUERIES = 8
_PROGRESS_QUERY = "lw.progress"
_TYPES = (ORCHESTRATOR_WORKFLOW, PLANNER_WORKFLOW, WORKER_WORKFLOW, DREAMING_WORKFLOW)


class ApprovalRefused(Exception):
    """A decision the workflow (or the request's shape) refused; nothing was decided."""


@dataclass
class Listing:
    """What one look across the running workflows found."""

    pending: list[ApprovalRequest] = field(default_factory=list)
    decided: list[ApprovalRecord] = field(default_factory=list)
    #: Workflows whose progress no worker answered (their requests are not listed).
    unreachable: list[str] = field(default_factory=list)
    asked: int = 0
    #: More running workflows matched than ``limit``.
    more: bool = False


def _query(workflow_id: str | None, task_queue: str | None) -> str:
    types = ", ".join(f"'{t}'" for t in _TYPES)
    query = f"ExecutionStatus = 'Running' AND WorkflowType IN ({types})"
    if workflow_id is not None:
        try:
            parse_workflow_id(workflow_id)  # the grammar has no quotes or backslashes
        except InvalidWorkflowId as err:
            raise ValueError(f"--workflow {workflow_id!r}: {err}") from None
        query += f" AND (WorkflowId = '{workflow_id}' OR WorkflowId STARTS_WITH '{workflow_id}/')"
    if task_queue is not None:
        if not task_queue or "'" in task_queue or "\\" in task_queue:
            raise ValueError(
                f"task queue {task_queue!r} cannot be listed: give a non-empty name without "
                "quotes or backslashes"
            )
        query += f" AND TaskQueue = '{task_queue}'"
    return query


async def list_approvals(
    client: Client,
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    limit: int = LIST_LIMIT,
    query_timeout: timedelta = timedelta(seconds=5),
) -> Listing:
    """Pending requests (and the newest decisions) of the running lw workflows,
    oldest request first."""
    from .._agent import Progress

    listing = Listing()
    ids: list[str] = []
    async for execution in client.list_workflows(_query(workflow_id, task_queue), page_size=100):
        if len(ids) >= limit:
            listing.more = True
            break
        ids.append(execution.id)
    gate = asyncio.Semaphore(_CONCURRENT_QUERIES)

    async def ask(wid: str) -> Progress | None:
        async with gate:
            try:
                progress: Progress = await client.get_workflow_handle(wid).query(
                    _PROGRESS_QUERY, result_type=Progress, rpc_timeout=query_timeout
                )
            except (RPCError, WorkflowQueryFailedError, PayloadSealed):
                return None  # no worker, or no key to open its answer: listed as unreachable
            return progress

    answers = await asyncio.gather(*(ask(wid) for wid in ids))
    listing.asked = len(ids)
    for wid, progress in zip(ids, answers, strict=True):
        if progress is None:
            listing.unreachable.append(wid)
            continue
        # A workflow answers for itself only: one named like lw's on another worker could
        # list a harmless-looking request under a real run's ID (a reviewer approving it
        # would approve the real run's), so a request naming another workflow is left out.
        listing.pending += [r for r in progress.approvals if r.workflow_id == wid]
        listing.decided += [r for r in progress.decided if r.request.workflow_id == wid]
    listing.pending.sort(key=lambda r: (r.requested_at, r.workflow_id, r.id))
    listing.decided.sort(key=lambda r: r.decided_at)
    return listing


async def decide(
    client: Client, workflow_id: str, request_id: str, *, approve: bool, by: str, why: str = ""
) -> ApprovalRecord:
    """Approve or deny one pending request of ``workflow_id``; raises
    :class:`ApprovalRefused` saying why when the workflow refuses it."""
    try:
        decision = ApprovalDecision(request_id=request_id, approve=approve, by=by, why=why)
    except ValidationError as err:
        problems = "; ".join(e["msg"] for e in err.errors())
        raise ApprovalRefused(
            f"request {request_id!r} of {workflow_id}: {problems} (request ids look like a1-3f9c2e)"
        ) from None
    handle = client.get_workflow_handle(workflow_id)
    try:
        record: ApprovalRecord = await asyncio.wait_for(
            handle.execute_update(DECIDE_UPDATE, decision, result_type=ApprovalRecord),
            DECIDE_WAIT.total_seconds(),
        )
    except TimeoutError:
        raise ApprovalRefused(
            f"no worker took the decision on {request_id} of {workflow_id} within "
            f"{DECIDE_WAIT.seconds}s: is a worker polling its task queue? The server may "
            "still deliver it when one does; see lw-temporal approvals list"
        ) from None
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
        raise ApprovalRefused(message) from None
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            raise ApprovalRefused(
                f"no running workflow {workflow_id!r}: it finished, or the ID is wrong "
                "(see lw-temporal approvals list)"
            ) from None
        raise
    return record
