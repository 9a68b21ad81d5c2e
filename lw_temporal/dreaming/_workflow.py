"""``lw.Dreaming``: claim and extract runs, let the dreaming agent (or, without a
model, the consolidator) write notes into dreaming's own store, then wait for a human
to approve the proposal (whole or in part), reject it, or let it time out."""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

from .._agent import AgentInput
from .._base import Unreadable, lenient
from .._ids import DREAMING_WORKFLOW, InvalidWorkflowId, Role, parse_workflow_id_for_type
from .._workflows._loop import _Agent
from ..errors._kinds import INVALID_REQUEST, INVALID_WORKFLOW_ID, NON_RETRYABLE, lw_error
from ._records import (
    DREAM_CONSOLIDATE,
    DREAM_EXTRACT,
    DREAM_FIND_RUNS,
    DREAM_PROMOTE,
    DREAM_PROPOSE,
    DREAM_RELEASE,
    DREAM_SHOW,
    QUERY_STATE,
    UPDATE_APPROVE,
    UPDATE_REJECT,
    UPDATE_SHOW,
    ConsolidateRequest,
    ConsolidateResult,
    Decision,
    DreamInput,
    DreamResult,
    DreamState,
    DreamStatus,
    ExtractRequest,
    ExtractResult,
    FindRunsRequest,
    FindRunsResult,
    PromoteRequest,
    PromotionOutcome,
    ProposeRequest,
    ProposeResult,
    ReleaseRequest,
    ShowRequest,
    ShowResult,
)

if TYPE_CHECKING:
    DreamStart = DreamInput
    DecisionInput = Decision
else:  # an input that is not a DreamInput fails the dream once, a decision that is not
    # one is refused saying why (see .._base.lenient)
    DreamStart = lenient(DreamInput)
    DecisionInput = lenient(Decision)

_ACTIVITY_RETRY = RetryPolicy(maximum_attempts=5, non_retryable_error_types=list(NON_RETRYABLE))
_R = TypeVar("_R", bound=BaseModel)


async def _call(
    name: str, request: BaseModel, result_type: type[_R], minutes: int, *, reads_runs: bool = False
) -> _R:
    """One dreaming activity, with the retry policy they share; one that reads many runs
    heartbeats, so a worker lost mid-batch is noticed in minutes, not at its timeout."""
    result: _R = await workflow.execute_activity(
        name,
        request,
        result_type=result_type,
        start_to_close_timeout=timedelta(minutes=minutes),
        heartbeat_timeout=timedelta(minutes=2) if reads_runs else None,
        retry_policy=_ACTIVITY_RETRY,
    )
    return result


def _update_id() -> str:
    info = workflow.current_update_info()
    assert info is not None  # called in the approve handler
    return info.id


def dream_task(target: str, runs: int) -> str:
    return (
        f"Consolidate {runs} finished run{'s' if runs != 1 else ''} of {target}: one file "
        f"each in /mnt/scratch/own/runs/. Write your notes to /mnt/memory/workflow/, then "
        "call finish."
    )


@workflow.defn(name=DREAMING_WORKFLOW)
class DreamingWorkflow(_Agent):
    """One dream of one target; the agent loop is the one every role runs."""

    role = Role.DREAMING

    def __init__(self) -> None:
        super().__init__()
        #: The outcome so far: what the state query answers and the run returns.
        self._outcome = DreamResult(target="", status=DreamStatus.COLLECTING)
        self._deadline: datetime | None = None
        self._promoting = False
        self._closed = False

    @workflow.run
    async def run(self, request: DreamStart) -> DreamResult:
        info = workflow.info()
        if isinstance(request, Unreadable):
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {info.workflow_id!r} (dreaming) was started with an input it "
                f"cannot use ({request.problem()}); start it with a DreamInput naming the "
                "definition to dream of, e.g. DreamInput(target='research'), or let "
                "`lw-temporal dream schedule <definition> --now` start it",
            )
        try:
            agent_id = parse_workflow_id_for_type(info.workflow_id, DREAMING_WORKFLOW)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
        if agent_id.definition_id != request.target:
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {info.workflow_id!r} dreams of {agent_id.definition_id!r} but its "
                f"input names {request.target!r}; start it as "
                f"dream_{request.target}@<token>",
            )
        self._set(target=request.target)
        options = request.options
        found = await _call(
            DREAM_FIND_RUNS,
            FindRunsRequest(
                max_runs=options.max_runs,
                batch_size=options.batch_size,
                statuses=options.statuses,
                since=options.since,
            ),
            FindRunsResult,
            10,
            reads_runs=True,
        )
        self._set(runs=found.runs)
        if found.runs == 0:
            self._set(status=DreamStatus.NOTHING_NEW)
            return self._outcome
        for batch in range(found.batches):
            await _call(
                DREAM_EXTRACT,
                ExtractRequest(batch=batch, batch_size=options.batch_size),
                ExtractResult,
                30,
                reads_runs=True,
            )
        self._set(agent=found.agent)
        if found.agent:
            self._set(status=DreamStatus.DREAMING)
            await self._loop(AgentInput(task=dream_task(request.target, found.runs)))
        else:
            self._set(status=DreamStatus.CONSOLIDATING)
            await _call(
                DREAM_CONSOLIDATE,
                ConsolidateRequest(batches=found.batches),
                ConsolidateResult,
                30,
                reads_runs=True,
            )
        proposal = await _call(
            DREAM_PROPOSE, ProposeRequest(batches=found.batches), ProposeResult, 5
        )
        self._set(changes=proposal.changes, changes_count=proposal.changes_count)
        if not proposal.changes:
            self._set(status=DreamStatus.NOTHING_NEW)
            return self._outcome

        self._set(status=DreamStatus.AWAITING_APPROVAL)
        self._deadline = workflow.now() + options.approval_timeout
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._closed,
                timeout=options.approval_timeout,
                timeout_summary="await review",
            )
        # An approval already promoting as the timer fired still counts.
        await workflow.wait_condition(lambda: not self._promoting)
        if not self._closed:
            self._closed = True
            self._set(status=DreamStatus.TIMED_OUT)
            # Unreviewed runs go back to the target's next dream.
            await workflow.execute_activity(
                DREAM_RELEASE,
                ReleaseRequest(batches=found.batches),
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=_ACTIVITY_RETRY,
            )
        # Let the deciding update hand its outcome to the reviewer before closing.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._outcome

    def _set(self, **changes: Any) -> None:
        """Moves the outcome on (it is frozen: the state query may read it between steps)."""
        self._outcome = self._outcome.model_copy(update=changes)

    @workflow.query(name=QUERY_STATE)
    def state(self) -> DreamState:
        return self._outcome.state(workflow.info().workflow_id, self._deadline)

    @workflow.update(name=UPDATE_SHOW)
    async def show(self, max_bytes: int) -> ShowResult:
        return await _call(
            DREAM_SHOW,
            ShowRequest(max_bytes=max_bytes),
            ShowResult,
            2,
        )

    @show.validator
    def _validate_show(self, max_bytes: int) -> None:
        if not self._outcome.changes:
            raise lw_error(
                INVALID_REQUEST,
                f"dream {workflow.info().workflow_id!r} is {self._outcome.status.value}: it has "
                "no proposal to show yet",
            )

    @workflow.update(name=UPDATE_APPROVE)
    async def approve(self, decision: DecisionInput) -> PromotionOutcome:
        assert isinstance(decision, Decision)  # the validator refused anything else
        self._promoting = True
        self._set(status=DreamStatus.PROMOTING)
        try:
            outcome = await _call(
                DREAM_PROMOTE,
                PromoteRequest(update_id=_update_id()),
                PromotionOutcome,
                5,
            )
        finally:
            self._promoting = False
            self._set(status=DreamStatus.AWAITING_APPROVAL)
        if outcome.conflicts and not outcome.promoted:
            return outcome  # nothing changed: the proposal waits for another decision
        self._set(decision=decision, promotion=outcome, status=DreamStatus.APPROVED)
        self._closed = True
        return outcome

    @approve.validator
    def _validate_approve(self, decision: DecisionInput) -> None:
        self._check_pending("approve", decision)

    @workflow.update(name=UPDATE_REJECT)
    async def reject(self, decision: DecisionInput) -> DreamStatus:
        assert isinstance(decision, Decision)  # the validator refused anything else
        self._set(decision=decision, status=DreamStatus.REJECTED)
        self._closed = True
        return DreamStatus.REJECTED

    @reject.validator
    def _validate_reject(self, decision: DecisionInput) -> None:
        self._check_pending("reject", decision)

    def _check_pending(self, verb: str, decision: DecisionInput) -> None:
        if isinstance(decision, Unreadable):
            raise lw_error(
                INVALID_REQUEST,
                f"cannot {verb} dream {workflow.info().workflow_id!r} with that decision "
                f'({decision.problem()}); send {{"who": NAME, "why": TEXT, "only": '
                f"[PATH, ...]}}, or use lw-temporal dream {verb} <dream> --by NAME",
            )
        if self._outcome.status is not DreamStatus.AWAITING_APPROVAL or self._closed:
            raise lw_error(
                INVALID_REQUEST,
                f"cannot {verb} dream {workflow.info().workflow_id!r}: it is "
                f"{self._outcome.status.value}, not awaiting approval",
            )
        if self._deadline is not None and workflow.now() >= self._deadline:
            # Its timer fired with this decision (no worker saw it in time): it timed
            # out, and its runs go back to the next dream.
            raise lw_error(
                INVALID_REQUEST,
                f"cannot {verb} dream {workflow.info().workflow_id!r}: its review timed out "
                f"at {self._deadline:%Y-%m-%d %H:%M:%S}Z; the target's next dream reads "
                "its runs again",
            )
