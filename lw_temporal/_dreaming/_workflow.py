"""``lw.Dreaming``: collect, consolidate, then wait for a human decision."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from .._errors import INVALID_REQUEST, INVALID_WORKFLOW_ID, NON_RETRYABLE, lw_error
from .._ids import DREAMING_WORKFLOW, InvalidWorkflowId, parse_workflow_id_for_type
from ._models import (
    DREAM_CONSOLIDATE,
    DREAM_EXTRACT,
    DREAM_FIND_RUNS,
    DREAM_PROMOTE,
    QUERY_STATE,
    UPDATE_APPROVE,
    UPDATE_REJECT,
    ConsolidateRequest,
    ConsolidateResult,
    Cursor,
    Decision,
    DreamInput,
    DreamResult,
    DreamState,
    DreamStatus,
    ExtractRequest,
    ExtractResult,
    FindRunsRequest,
    FindRunsResult,
    NoteRef,
    PromoteRequest,
    PromotionOutcome,
)

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
