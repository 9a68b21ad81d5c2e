"""Starting child runs from the agent loop: deterministic IDs, and the bounds of the
parent's definition on how far a tree may fan out.

A model can ask for any number of ``run_step``/``plan_workflow`` calls, in one reply
or over many; Temporal alone would let a planner hold 2,000 pending children and each
take 10,000 turns. So every child start is checked against the parent's bounds (from
its ``WorkflowDefinition``, or ``OrchestratorOptions`` for a pipeline): children per
turn, children per run, and turns per tree. A call beyond them is answered with an
error result that names the bound, and starts nothing.

Turns per tree hold across parallel children: a group of children started together
shares what the parent's tree has left (keeping one turn for the parent to read their
results), each child gets its share as its own tree's budget (``AgentInput.tree_turns``,
never more than its own bound), and what a child's tree did not use comes back when it
ends. A failed child counts its whole share.

Child IDs are assigned in call order from a counter in the workflow's state, so a
replay or a continue-as-new starts exactly the children it started before.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import TypedSearchAttributes
from temporalio.exceptions import (
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)

from .._agent import (
    AgentInput,
    AgentResult,
    AgentState,
    Bounds,
    Tool,
    ToolCall,
    ToolResult,
    WorkerSettings,
    tool_for,
)
from .._agent._tools import TASK_CAP, PlanWorkflowArgs, clip
from .._ids import AgentId, InvalidWorkflowId, Role
from ..errors._kinds import WRONG_TOPOLOGY, error_type

MEMO_ROLE = "lw.role"
MEMO_DEFINITION = "lw.definition"


def failure_text(err: BaseException) -> str:
    """The innermost useful message of an activity or child failure."""
    cause: BaseException | None = err
    message = str(err)
    while cause is not None:
        if isinstance(cause, ApplicationError):
            kind = f"{cause.type}: " if cause.type else ""
            return f"{kind}{cause.message}"
        if isinstance(cause, FailureError) and str(cause):
            message = str(cause)
        cause = cause.__cause__
    return message


class ChildStarts:
    """The child-starting half of the agent loop (mixed into ``_loop._Agent``, which
    provides the state, the identity and the result builder used here)."""

    role: Role
    _state: AgentState
    #: Children started in the current turn, and the tree turns held by running ones.
    _turn_children: int
    _allotted: int

    if TYPE_CHECKING:  # provided by the loop

        @property
        def agent_id(self) -> AgentId: ...

        def _result(
            self,
            call: ToolCall,
            turn: int,
            text: str,
            *,
            error: bool = False,
            ref: str | None = None,
        ) -> ToolResult: ...

        def _refusal(self, call: ToolCall, spec: Tool[Any, Any] | None) -> str | None: ...

        def _search_attributes(
            self, role: Role, definition: str | None
        ) -> TypedSearchAttributes: ...

    # -- bounds ---------------------------------------------------------------------
    def _settings(self) -> WorkerSettings:
        return self._state.settings or WorkerSettings()

    def _bounds(self) -> Bounds:
        return self._settings().bounds_for(self.role, self.agent_id.definition_id)

    def _bound_name(self) -> str:
        if self.role is Role.ORCHESTRATOR:
            return "the orchestrator's OrchestratorOptions"
        return f"definition {self.agent_id.definition_id!r}"

    def tree_left(self) -> int | None:
        """Turns this run's tree has left, counting the current turn as taken."""
        budget = self._state.tree_budget
        if budget is None:
            return None
        return budget - (self._state.turn + 1) - self._state.tree_used - self._allotted

    def _over_bounds(self, call: ToolCall, accepted: int, bounds: Bounds) -> str | None:
        """Why one more child (after ``accepted`` of this group) passes a bound."""
        started = len(self._state.children) + accepted
        if self._turn_children + accepted >= bounds.children_per_turn:
            return (
                f"{call.name}: not started: at most {bounds.children_per_turn} children per "
                f"turn ({self._bound_name()}, max_children_per_turn); start the others in "
                "your next turn"
            )
        if started >= bounds.children:
            return (
                f"{call.name}: not started: this run already started {started} children, "
                f"its limit ({self._bound_name()}, max_children={bounds.children}); finish "
                "with what they found"
            )
        return None

    # -- starting -------------------------------------------------------------------
    def _start_children(
        self, calls: Sequence[ToolCall], turn: int
    ) -> list[Coroutine[Any, Any, ToolResult]]:
        """Decide every call of the group first (arguments, bounds, the tree's turns),
        then assign IDs in call order to the calls that start, so IDs never depend on
        timing and a refused call takes no ID."""
        state = self._state
        bounds = self._bounds()
        decided: list[str | Callable[[str], AgentId]] = []
        accepted = 0
        for call in calls:
            made = self._child_maker(call)
            if not isinstance(made, str):
                over = self._over_bounds(call, accepted, bounds)
                if over is None:
                    accepted += 1
                else:
                    made = over
            decided.append(made)
        left = self.tree_left()
        room = accepted if left is None else min(accepted, max(left - 1, 0))
        each = None if left is None or not room else max(left - 1, 0) // room
        coroutines: list[Coroutine[Any, Any, ToolResult]] = []
        for call, made in zip(calls, decided, strict=True):
            if isinstance(made, str):
                coroutines.append(self._refused(call, turn, made))
                continue
            if room <= 0:
                coroutines.append(self._refused(call, turn, self._no_turns_left(call, left)))
                continue
            room -= 1
            child = made(str(state.next_child))
            state.next_child += 1
            state.children.append(str(child))
            cap = self._settings().tree_cap(child.role, child.definition_id)
            share = cap if each is None else min(cap, each)
            self._allotted += share
            self._turn_children += 1
            coroutines.append(self._child(call, turn, child, share))
        return coroutines

    def _no_turns_left(self, call: ToolCall, left: int | None) -> str:
        return (
            f"{call.name}: not started: this run's tree has {max(left or 0, 0)} turns left "
            f"of its budget ({self._bound_name()}, max_tree_turns), too few for another "
            "child; finish with what you have"
        )

    async def _refused(self, call: ToolCall, turn: int, text: str) -> ToolResult:
        return self._result(call, turn, text, error=True)

    def _child_maker(self, call: ToolCall) -> str | Callable[[str], AgentId]:
        """How to make the call's child ID from a token, or why the call cannot start
        a child at all."""
        spec = tool_for(self.role, call.name)
        refusal = self._refusal(call, spec)
        if refusal is not None or spec is None:
            return refusal or "not a tool"
        try:
            args = spec.arguments(call.arguments)
        except ValidationError as err:
            return f"{call.name}: invalid arguments: {err}"
        agent_id = self.agent_id
        if isinstance(args, PlanWorkflowArgs):
            workflow_name = args.workflow

            def make(token: str) -> AgentId:
                return agent_id.sub_run(workflow_name, token)
        else:
            make = agent_id.step_run
        try:
            make("1")
        except (InvalidWorkflowId, ValueError) as err:
            return f"cannot start {call.name}: {err}"
        return make

    async def _child(
        self, call: ToolCall, turn: int, child_id: AgentId, share: int | None
    ) -> ToolResult:
        state = self._state
        task = clip(str(call.arguments.get("task", "")), TASK_CAP)
        child_role = child_id.role
        ref = str(child_id)
        try:
            result: AgentResult = await workflow.execute_child_workflow(
                child_id.workflow_type,
                AgentInput(
                    task=task,
                    settings=(
                        None
                        if state.settings is None
                        else state.settings.for_child(child_id.definition_id)
                    ),
                    tree_turns=share,
                ),
                id=str(child_id),
                result_type=AgentResult,
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                memo={MEMO_ROLE: child_role.value, MEMO_DEFINITION: child_id.definition_id or ""},
                search_attributes=(
                    self._search_attributes(child_role, child_id.definition_id)
                    if state.settings is not None and state.settings.index_search_attributes
                    else None
                ),
                static_summary=clip(f"{child_role.value}: {task}", 200),
            )
        except ChildWorkflowError as err:
            if is_cancelled_exception(err):
                raise
            if error_type(err) == WRONG_TOPOLOGY:
                # The tree split across disks: its work cannot all be where it reads.
                raise ApplicationError(
                    f"{child_id} failed: {failure_text(err)}", type=WRONG_TOPOLOGY,
                    non_retryable=True,
                ) from None  # fmt: skip
            state.children_finished += 1
            self._ended(share, share or 0)
            text = f"{child_id} failed: {failure_text(err)}"
            return self._result(call, turn, text, error=True, ref=ref)
        except WorkflowAlreadyStartedError as err:
            self._ended(share, 0)
            return self._result(call, turn, f"{child_id} did not start: {err}", error=True)
        state.children_finished += 1
        state.children_usage = state.children_usage + result.tree_usage
        self._ended(share, result.tree_turns or result.turns)
        text = f"{child_id} finished after {result.turns} turns: {result.summary}"
        return self._result(call, turn, text, ref=ref)

    def _ended(self, share: int | None, used: int) -> None:
        """A child's tree ended: its share is no longer held, what it used is spent."""
        self._allotted -= share or 0
        self._state.tree_used += used
