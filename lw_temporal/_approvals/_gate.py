"""The agent loop's side of approvals: which calls of a reply wait for a person, the
durable wait, and the update that decides.

Mixed into every agent workflow (:class:`Approvals`). When a reply arrives the loop
opens it here: each call a rule of the run's definition asks about becomes a pending
request at once (so a reviewer sees the whole reply's requests together), recorded in
the run's carried :class:`ApprovalBook`. The loop still runs the reply's calls in order;
it waits at a requested call until a decision arrives (the ``lw.approvals.decide``
update) or the rule's timeout passes, so calls after it wait too, and every result of
the reply goes back to the model together in the next turn, as parallel calls always
do. A wait is a Temporal timer and a condition on the workflow's state, so it survives
worker restarts; the decision enters the history only once its validator has accepted
it (the request is pending, not decided, and the decider may decide it). Each decision
is written to the run's bookkeeping by ``lw.approvals.record``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from .._agent import AgentState, ToolCall, ToolKind, tool_for
from .._base import Unreadable, lenient
from .._ids import AgentId, InvalidWorkflowId, Role, parse_workflow_id
from ..errors._kinds import APPROVAL_REFUSED, SANDBOX_FAILED, lw_error
from ._actions import actions_of
from ._records import (
    DECIDE_UPDATE,
    RECORD_ACTIVITY,
    REQUEST_TAG_CHARS,
    REQUESTS_PER_REPLY,
    ApprovalBook,
    ApprovalDecision,
    ApprovalRecord,
    ApprovalRequest,
    Outcome,
    RecordRequest,
    RecordResult,
    shown_arguments,
    split_request_id,
)
from ._rules import ApprovalRule, first_match

_RECORD_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)
#: Attempts of an approved call whose sandbox could not be set up: the command never
#: started (the launcher reports before it execs), so another attempt cannot run it twice.
ONCE_ATTEMPTS = 3
#: Request ids carry a tag drawn from the workflow's seeded randomness (see
#: ``_records.REQUEST_PREFIX``); histories recorded before it number untagged.
TAGGED_IDS_PATCH = "lw-approval-ids-tagged"
_T = TypeVar("_T")


def _never_started(err: ActivityError) -> bool:
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            return cause.type == SANDBOX_FAILED
        cause = cause.__cause__
    return False


async def at_most_once(attempt: Callable[[str], Awaitable[_T]], activity_id: str) -> _T:
    """Run an approved call's activity (scheduled with a single attempt, so Temporal
    never retries what may have run), again only when it never started."""
    for number in range(1, ONCE_ATTEMPTS + 1):
        try:
            # The same id: the failed attempt is closed, and the result recorder and the
            # next model turn find the call's result under it.
            return await attempt(activity_id)
        except ActivityError as err:
            if number == ONCE_ATTEMPTS or not _never_started(err):
                raise
            await workflow.sleep(timedelta(seconds=number), summary="approved call: sandbox again")
    raise AssertionError("unreachable")


def _sub_run_definition(child: str) -> str | None:
    try:
        return parse_workflow_id(child).definition_id
    except InvalidWorkflowId:
        return None


class ApprovalGate:
    """One run's approvals: its rules, its book, the requests of the reply at hand."""

    def __init__(self) -> None:
        self.book = ApprovalBook()
        self._role = Role.PLANNER
        self._agent: AgentId | None = None
        self._rules: dict[str, tuple[ApprovalRule, ...]] = {}
        #: Requests of the reply being acted on, by the call's index in it.
        self._open: dict[int, ApprovalRequest] = {}
        #: Decisions that arrived for requests of this run (by request id).
        self._decided: dict[str, ApprovalRecord] = {}
        #: Calls of the reply past REQUESTS_PER_REPLY, answered unrun (by index).
        self._over: dict[int, str] = {}

    def configure(self, agent_id: AgentId, role: Role, state: AgentState) -> None:
        self._agent, self._role, self.book = agent_id, role, state.approvals
        self._rules = dict(state.settings.approvals) if state.settings else {}

    def _rules_for(self, action_workflow: str | None) -> tuple[ApprovalRule, ...]:
        """A sub-run is asked about by its own definition's rules; every other action
        by the rules of the run's definition."""
        if self._role is Role.ORCHESTRATOR:
            return self._rules.get(action_workflow or "", ())
        definition = self._agent.definition_id if self._agent else None
        return self._rules.get(definition or "", ())

    # -- opening a reply ------------------------------------------------------------
    def open(self, calls: Sequence[ToolCall], turn: int, state: AgentState) -> None:
        """Make a pending request of every call of the reply that a rule asks about."""
        self._open, self._over = {}, {}
        if not self._rules:
            return
        sub_runs = Counter(_sub_run_definition(c) for c in state.children)
        steps = len(state.children)
        for index, call in enumerate(calls):
            spec = tool_for(self._role, call.name)
            if spec is not None and spec.kind is ToolKind.FINISH:
                break  # the run ends there: later calls never run
            if spec is None or call.invalid_arguments is not None:
                continue  # answered with an error, never run
            try:
                spec.arguments(call.arguments)
            except ValidationError:
                continue
            actions = actions_of(call.name, call.arguments)
            workflow_id = None
            for i, action in enumerate(actions):
                if action.tool == "plan_workflow":
                    workflow_id = action.workflow
                    actions[i] = action.model_copy(update={"started": sub_runs[workflow_id]})
                    sub_runs[workflow_id] += 1
                elif action.tool == "run_step":
                    actions[i] = action.model_copy(update={"started": steps})
                    steps += 1
            rule = first_match(self._rules_for(workflow_id), actions, self._role)
            if rule is None:
                continue
            if len(self._open) >= REQUESTS_PER_REPLY:
                self._over[index] = (
                    f"{call.name}: not run: more than {REQUESTS_PER_REPLY} calls of one reply "
                    f"need a person's approval (rule: {rule.describe()}); ask for at most "
                    f"{REQUESTS_PER_REPLY} at a time"
                )
                continue
            self._open[index] = self._request(call, turn, rule, actions[0].tool)

    def _request(
        self, call: ToolCall, turn: int, rule: ApprovalRule, action: str
    ) -> ApprovalRequest:
        now = workflow.now()
        shown, cut, sha = shown_arguments(call.arguments)
        agent = self._agent
        # Drawn, not derived from the run id: a reset run replays the events before its
        # reset point with the same seed (so the ids its recorded decisions name come
        # out the same) and is reseeded after it.
        tag = (
            f"{workflow.random().getrandbits(REQUEST_TAG_CHARS * 4):0{REQUEST_TAG_CHARS}x}"
            if workflow.patched(TAGGED_IDS_PATCH)
            else ""
        )
        request = ApprovalRequest(
            id=self.book.new_id(tag),
            workflow_id=workflow.info().workflow_id,
            role=self._role,
            definition_id=agent.definition_id if agent else None,
            tool=call.name,
            action=action,
            arguments=shown,
            arguments_cut=cut,
            arguments_sha256=sha,
            conversation=workflow.info().first_execution_run_id or workflow.info().run_id,
            turn=turn,
            call_id=call.id,
            rule=rule.describe(),
            approvers=rule.approvers,
            requested_at=now,
            deadline=now + rule.timeout,
            on_timeout=rule.on_timeout,
        )
        self.book.pending.append(request)
        return request

    def requested(self, index: int) -> ApprovalRequest | None:
        return self._open.get(index)

    def refused(self, index: int) -> str | None:
        """Why the reply's call ``index`` is answered unrun without a request, if it is."""
        return self._over.get(index)

    # -- waiting --------------------------------------------------------------------
    async def verdict(self, index: int) -> ApprovalRecord | None:
        """The decision on the reply's call ``index`` (waiting for it), or None when no
        rule asked about the call."""
        request = self._open.get(index)
        if request is None:
            return None
        remaining = request.deadline - workflow.now()
        if request.id not in self._decided and remaining > timedelta(0):
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: request.id in self._decided,
                    timeout=remaining,
                    timeout_summary=f"approval {request.id}",
                )
        record = self._decided.get(request.id)
        if record is None:
            timed_out = (
                Outcome.TIMED_OUT_APPROVED
                if request.on_timeout == "approve"
                else Outcome.TIMED_OUT_DENIED
            )
            record = ApprovalRecord(
                request=request, outcome=timed_out, by="timeout", decided_at=workflow.now()
            )
            self.book.close(record)
            self._decided[request.id] = record
        await workflow.execute_activity(
            RECORD_ACTIVITY,
            RecordRequest(request=request, record=record),
            result_type=RecordResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=_RECORD_RETRY,
            summary=f"approval {request.id}: {record.outcome.value} by {record.by}",
        )
        return record

    # -- deciding (the update) -------------------------------------------------------
    def check(self, decision: ApprovalDecision) -> None:
        """Refuse a decision that cannot apply, before it enters the history."""
        here = workflow.info().workflow_id
        request_id = decision.request_id
        request = self.book.find_pending(request_id)
        if request is None:
            done = self.book.find_decided(request_id)
            if done is not None:
                raise lw_error(
                    APPROVAL_REFUSED,
                    f"approval {request_id} of {here} was already decided: "
                    f"{done.outcome.value} by {done.by} at {done.decided_at:%Y-%m-%d %H:%M:%S}Z",
                )
            number, tag = split_request_id(request_id)
            kept = [r.id for r in self.book.pending] + [r.request.id for r in self.book.decided]
            if number < self.book.next_id and not tag and not any("-" in i for i in kept):
                raise lw_error(
                    APPROVAL_REFUSED, f"approval {request_id} of {here} was already decided"
                )
            waiting = ", ".join(r.id for r in self.book.pending) or "none"
            raise lw_error(
                APPROVAL_REFUSED,
                f"no approval request {request_id} in {here} (pending: {waiting}; a request "
                "decided long ago, or opened by another run of this ID before a reset or "
                "a retry, is not pending: ids are never reused); "
                "see lw-temporal approvals list",
            )
        if workflow.now() >= request.deadline:
            # Its timer fired with this decision (no worker saw it in time): the rule's
            # on_timeout decides it, not a decision that came after the deadline.
            outcome = "approved" if request.on_timeout == "approve" else "denied"
            raise lw_error(
                APPROVAL_REFUSED,
                f"approval {request_id} of {here} timed out at "
                f"{request.deadline:%Y-%m-%d %H:%M:%S}Z before this decision arrived: it is "
                f"{outcome}, as its rule says on timeout",
            )
        if request.approvers and decision.by not in request.approvers:
            raise lw_error(
                APPROVAL_REFUSED,
                f"{decision.by} may not decide approval {request_id} of {here}: its rule "
                f"takes decisions from {', '.join(request.approvers)} only",
            )
        if not decision.approve and not decision.why.strip():
            raise lw_error(
                APPROVAL_REFUSED,
                f"denying approval {request_id} of {here} needs a reason (--why TEXT): the "
                "agent reads it as the call's result",
            )

    def apply(self, decision: ApprovalDecision) -> ApprovalRecord:
        request = self.book.find_pending(decision.request_id)
        assert request is not None  # the validator refused anything else
        record = ApprovalRecord(
            request=request,
            outcome=Outcome.APPROVED if decision.approve else Outcome.DENIED,
            by=decision.by,
            why=decision.why,
            decided_at=workflow.now(),
        )
        self.book.close(record)
        self._decided[request.id] = record
        return record


if TYPE_CHECKING:
    DecisionInput = ApprovalDecision
else:  # a payload that is not a decision is refused saying why (see .._base.lenient)
    DecisionInput = lenient(ApprovalDecision)


@dataclass(frozen=True)
class Verdict:
    """What the loop does with a call a rule asked about: run it (once), or answer it,
    unrun, with ``text`` as a failed tool result."""

    runs: bool
    text: str = ""


class Approvals:
    """The decision update of every agent workflow, and the gate the loop asks."""

    _status: str
    _running: list[str]

    def __init__(self) -> None:
        self._gate = ApprovalGate()

    async def _verdicts(self, indices: Iterable[int]) -> list[Verdict | None]:
        """What to do with the reply's calls at ``indices`` (None where no rule asks),
        waiting for their decisions together; the live tree says what waits."""
        gate = self._gate
        wanted = list(indices)
        requests = [r for i in wanted if (r := gate.requested(i)) is not None]
        if requests:
            self._status = "waiting for approval"
            self._running = [f"{r.tool} {r.id}" for r in requests]
            records = await asyncio.gather(*(gate.verdict(i) for i in wanted))
        else:
            records = [None] * len(wanted)  # nothing to wait for (and no yield to the loop)
        verdicts: list[Verdict | None] = []
        for index, record in zip(wanted, records, strict=True):
            over = gate.refused(index)
            if over is not None:
                verdicts.append(Verdict(runs=False, text=over))
            elif record is None:
                verdicts.append(None)
            else:
                text = "" if record.outcome.runs else record.result_text()
                verdicts.append(Verdict(runs=record.outcome.runs, text=text))
        return verdicts

    @workflow.update(name=DECIDE_UPDATE)
    def decide(self, decision: DecisionInput) -> ApprovalRecord:
        """Approve or deny a pending request (the call runs, or the model is told why not)."""
        assert isinstance(decision, ApprovalDecision)  # the validator refused anything else
        return self._gate.apply(decision)

    @decide.validator
    def _check_decision(self, decision: DecisionInput) -> None:
        if isinstance(decision, Unreadable):
            raise lw_error(
                APPROVAL_REFUSED,
                f"not a decision for {workflow.info().workflow_id} "
                f'({decision.problem()}); send {{"request_id": "a1-3f9c2e", "approve": '
                'true or false, "by": NAME, "why": TEXT}, or use lw-temporal approvals '
                "approve|deny",
            )
        self._gate.check(decision)
