"""The agent workflows' inputs, results, query answer and carried state.

Everything here travels through Temporal (workflow inputs and results, the
``lw.progress`` query, continue-as-new), so each is bounded: the conversation itself
lives worker-side (see ``_conversation``) and only what is new each turn enters the
history.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from .._approvals._records import ApprovalBook, ApprovalRecord, ApprovalRequest
from .._approvals._rules import ApprovalRule
from .._definitions import MAX_CHILDREN, MAX_CHILDREN_PER_TURN, MAX_TREE_TURNS
from .._ids import Role
from .._topology import HostPin
from ._protocol import Exchange, ToolResult, Usage

#: The default turn budget of an orchestrator and of the dreaming agent (planners and
#: workers take theirs from ``WorkflowDefinition.max_turns``).
ORCHESTRATOR_MAX_TURNS = 24


#: The orchestrator's default turn budget for its whole tree (a pipeline).
ORCHESTRATOR_MAX_TREE_TURNS = 2000


class Bounds(BaseModel):
    """How far one run may fan out: children started per turn and per run (its
    continue-as-new chain), and the turns its whole tree may take (its own and every
    descendant's). Calls beyond them are answered with an error the model reads."""

    children_per_turn: int = MAX_CHILDREN_PER_TURN
    children: int = MAX_CHILDREN
    tree_turns: int = MAX_TREE_TURNS


class WorkerSettings(BaseModel):
    """Worker-side settings workflow code needs but cannot see: read once per run
    tree (the ``lw.settings`` local activity, recorded in history so replay is
    deterministic) and handed to children in their input."""

    index_search_attributes: bool = False
    local_model: bool = False
    orchestrator_max_turns: int = ORCHESTRATOR_MAX_TURNS
    #: Turn budget per registered definition id (bounded by the registry's size).
    max_turns: dict[str, int] = Field(default_factory=dict)
    default_max_turns: int = ORCHESTRATOR_MAX_TURNS
    #: The host whose task queue runs the tree's activities (pinned runs), if any.
    pin: HostPin | None = None
    dreaming_max_turns: int = ORCHESTRATOR_MAX_TURNS
    #: Fan-out bounds per registered definition id, and the orchestrator's.
    bounds: dict[str, Bounds] = Field(default_factory=dict)
    orchestrator_bounds: Bounds = Field(
        default_factory=lambda: Bounds(tree_turns=ORCHESTRATOR_MAX_TREE_TURNS)
    )
    #: Approval rules per definition id, of the definitions that have any: a tree keeps
    #: the rules it started with, as it keeps its turn budgets.
    approvals: dict[str, tuple[ApprovalRule, ...]] = Field(default_factory=dict)

    def turns_for(self, role: Role, definition_id: str | None) -> int:
        if role is Role.DREAMING:
            return self.dreaming_max_turns
        if role is Role.ORCHESTRATOR or definition_id is None:
            return self.orchestrator_max_turns
        return self.max_turns.get(definition_id, self.default_max_turns)

    def bounds_for(self, role: Role, definition_id: str | None) -> Bounds:
        if role is Role.ORCHESTRATOR or definition_id is None:
            return self.orchestrator_bounds
        return self.bounds.get(definition_id, Bounds())

    def for_child(self, definition_id: str | None) -> WorkerSettings:
        """What a child of ``definition_id`` gets in its input: every setting, but of
        the per-definition tables only its own entry. A child reads no other one (a
        planner's steps share its definition, the ID grammar says so), and each child
        input is stored twice in the history (its parent's start command and its own
        start): with ten definitions registered the tables made up most of a step's
        input."""
        key = definition_id or ""

        def own(table: dict[str, Any]) -> dict[str, Any]:
            return {key: table[key]} if key in table else {}

        tables = ("max_turns", "bounds", "approvals")
        trimmed = {name: own(getattr(self, name)) for name in tables}
        if all(trimmed[name] == getattr(self, name) for name in tables):
            return self
        return self.model_copy(update=trimmed)

    def tree_cap(self, role: Role, definition_id: str | None) -> int:
        """The most turns a run of ``role`` may take with its whole tree: a worker
        starts no children, so its tree is its own turns."""
        if role is Role.WORKER or role is Role.DREAMING:
            return self.turns_for(role, definition_id)
        return self.bounds_for(role, definition_id).tree_turns


class AgentState(BaseModel):
    """What the loop carries across continue-as-new: counters, the answers the next
    model call needs, and a bounded tail of the conversation (enough to rebuild it
    if the worker-side copy is gone)."""

    turn: int = 0
    #: Results of the last turn's calls, not yet sent to the model.
    pending: list[ToolResult] = Field(default_factory=list)
    #: The newest exchanges (bounded in bytes), for a rebuild after continue-as-new.
    carried: list[Exchange] = Field(default_factory=list)
    next_child: int = 1
    children: list[str] = Field(default_factory=list)
    children_finished: int = 0
    failed_tools: int = 0
    #: Consecutive replies cut at the output token limit without a tool call.
    output_limit_hits: int = 0
    settings: WorkerSettings | None = None
    usage: Usage = Field(default_factory=Usage)
    #: Usage of finished children's trees.
    children_usage: Usage = Field(default_factory=Usage)
    #: Turns this run's tree may take (its bounds, or less when its parent allotted
    #: less), and the turns its ended children's trees took (a failed child counts its
    #: whole allotment).
    tree_budget: int | None = None
    tree_used: int = 0
    #: Approval requests (pending and the newest decided), ids never reused.
    approvals: ApprovalBook = Field(default_factory=ApprovalBook)


class AgentInput(BaseModel):
    """A run's input: its task (from the client or the parent) and loop options.

    ``turns_per_run`` continues-as-new after that many turns even when Temporal does
    not suggest it yet (it always does when a history grows large). ``settings`` and
    ``tree_turns`` are set by a parent (its worker's settings, the turns it allots the
    child's tree), ``state`` by the workflow itself when it continues as new: a run
    started by a client (no lw parent, not a continue-as-new) ignores both settings and
    state and reads its worker's settings, since a client's input is data, not
    configuration. ``untrusted``: the starter says the task is untrusted input (a page,
    a ticket, an email): the run is tainted from its first turn. It can only add taint;
    a task not marked is no proof of anything (a child of a tainted run is tainted
    whatever its input says).
    """

    task: str = ""
    turns_per_run: int | None = Field(default=None, gt=0)
    settings: WorkerSettings | None = None
    state: AgentState | None = None
    untrusted: bool = False
    #: The most turns the run's tree may take (only lowers its own bound).
    tree_turns: int | None = Field(default=None, gt=0)

    @model_serializer(mode="wrap")
    def _unmarked(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An unmarked input is the bytes it was before taint existed."""
        data = handler(self)
        if isinstance(data, dict) and not self.untrusted:
            data.pop("untrusted", None)
        return data


class AgentResult(BaseModel):
    """What an agent workflow returns: its answer, its children, and the tokens its
    whole tree used."""

    workflow_id: str
    role: Role
    definition_id: str | None
    summary: str
    turns: int
    children: list[str] = Field(default_factory=list)
    #: Turns of this run and every descendant.
    tree_turns: int = 0
    #: Tool calls of this run answered as errors (its children's are theirs).
    failed_tools: int = 0
    #: Tokens this run's own model calls used.
    usage: Usage = Field(default_factory=Usage)
    #: Tokens of this run and every descendant (the pipeline's total at the root).
    tree_usage: Usage = Field(default_factory=Usage)


class Progress(BaseModel):
    """The answer to the ``lw.progress`` query."""

    workflow_id: str
    role: Role
    definition_id: str | None
    status: str
    turn: int
    max_turns: int | None
    running: list[str] = Field(default_factory=list)
    children_started: int = 0
    children_finished: int = 0
    children: list[str] = Field(default_factory=list)
    failed_tools: int = 0
    summary: str | None = None
    #: The model's latest text (its newest reply, cut to SAID_CAP bytes), for the live
    #: tree: a query's answer is not part of the history.
    said: str = ""
    usage: Usage = Field(default_factory=Usage)
    #: This run's usage plus that of its finished children's trees.
    tree_usage: Usage = Field(default_factory=Usage)
    #: Tool calls waiting for a person, and the newest decisions (``decided_count`` in all).
    approvals: list[ApprovalRequest] = Field(default_factory=list)
    decided: list[ApprovalRecord] = Field(default_factory=list)
    decided_count: int = 0
