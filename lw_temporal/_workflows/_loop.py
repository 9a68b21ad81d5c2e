"""The agent loop every role runs, in workflow code: ask ``lw.model`` for tool calls,
run them as activities or child workflows, answer each call by id, repeat.

A turn sends ``lw.model`` only its new results; the whole conversation is assembled
worker-side, so the history grows by what is new in each turn. What a run may believe
about its own ID and its input is ``_trust``; how it starts children, ``_children``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)
from temporalio.exceptions import ActivityError, ApplicationError

from .._agent import (
    MODEL_ACTIVITY,
    SETTINGS_ACTIVITY,
    AgentInput,
    AgentResult,
    AgentState,
    Exchange,
    ModelResponse,
    ModelTurn,
    Progress,
    SettingsRequest,
    WorkerSettings,
)
from .._agent._tools import TASK_CAP, clip
from .._base import Unreadable
from .._ids import (
    PROGRESS_QUERY,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    AgentId,
    Role,
)
from .._telemetry._summary import model_summary
from .._trust import check_identity, trusted_input
from ..errors._kinds import (
    CONVERSATION_MISSING,
    INVALID_REQUEST,
    MODEL_OUTPUT_LIMIT,
    TURN_LIMIT,
    error_type,
    lw_error,
)
from ._calls import ToolCalls
from ._children import MEMO_DEFINITION, MEMO_ROLE

#: UTF-8 bytes of the newest exchanges a continue-as-new carries, so a rebuild of the
#: worker-side conversation after it still has the recent turns.
CARRIED_BYTES = 256 * 1024
#: Replies in a row cut at the output token limit before the run fails.
OUTPUT_LIMIT_HITS = 3
#: UTF-8 bytes of the model's latest text the progress query shows.
SAID_CAP = 1024

ROLE_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE)
DEFINITION_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION)


def _carried(exchanges: Sequence[Exchange]) -> list[Exchange]:
    """The newest exchanges within CARRIED_BYTES (always the last one)."""
    kept: list[Exchange] = []
    size = 0
    for exchange in reversed(exchanges):
        size += len(exchange.model_dump_json())
        if kept and size > CARRIED_BYTES:
            break
        kept.append(exchange)
    return kept[::-1]


class _Agent(ToolCalls):
    """The loop shared by all roles; subclasses fix the workflow type and role, and the
    tool registry decides which tools the role has."""

    role: Role

    def __init__(self) -> None:
        super().__init__()
        self._agent_id: AgentId | None = None
        self._state = AgentState()
        self._status = "starting"
        self._running: list[str] = []
        self._summary: str | None = None
        self._max_turns: int | None = None
        #: This run's conversation as workflow code knows it (rebuilt on replay from
        #: activity results, so it costs the history nothing).
        self._exchanges: list[Exchange] = []
        #: Digests of this run's tool results, by call id (their text is recorded on
        #: the worker that ran the tool).
        self._digests: dict[str, str] = {}
        self._conversation = ""
        #: The starter marked the task untrusted (sent with it to ``lw.model``).
        self._untrusted = False
        #: Children started this turn, and the tree turns held by running children.
        self._turn_children = 0
        self._allotted = 0

    @property
    def agent_id(self) -> AgentId:
        assert self._agent_id is not None
        return self._agent_id

    @property
    def tree_runs_id(self) -> str | None:
        """The runs root this run's tree was placed on (``_placement`` stamps it on
        every activity)."""
        settings = self._state.settings
        return None if settings is None or settings.pin is None else settings.pin.runs_id

    # -- visibility ---------------------------------------------------------------
    @workflow.query(name=PROGRESS_QUERY)
    def progress(self) -> Progress:
        return Progress(
            workflow_id=workflow.info().workflow_id,
            role=self.role,
            definition_id=self._agent_id.definition_id if self._agent_id else None,
            status=self._status,
            turn=self._state.turn,
            max_turns=self._max_turns,
            running=list(self._running),
            children_started=len(self._state.children),
            children_finished=self._state.children_finished,
            children=list(self._state.children),
            failed_tools=self._state.failed_tools,
            summary=self._summary,
            said=clip(self._exchanges[-1].reply.text, SAID_CAP) if self._exchanges else "",
            usage=self._state.usage,
            tree_usage=self._state.usage + self._state.children_usage,
            approvals=list(self._gate.book.pending),
            decided=list(self._gate.book.decided),
            decided_count=self._gate.book.decided_count,
        )

    def _label(self) -> dict[str, str]:
        return {MEMO_ROLE: self.role.value, MEMO_DEFINITION: self.agent_id.definition_id or ""}

    def _search_attributes(self, role: Role, definition: str | None) -> TypedSearchAttributes:
        pairs: list[SearchAttributePair[Any]] = [SearchAttributePair(ROLE_KEY, role.value)]
        if definition:
            pairs.append(SearchAttributePair(DEFINITION_KEY, definition))
        return TypedSearchAttributes(pairs)

    def _label_self(self) -> None:
        """Memo at start (a parent already sets it on its children); search attributes
        once the worker said they are registered on the server."""
        if workflow.memo_value(MEMO_ROLE, None) is None:
            workflow.upsert_memo(self._label())

    def _index_self(self) -> None:
        settings = self._state.settings
        if settings is None or not settings.index_search_attributes:
            return
        if workflow.info().typed_search_attributes.get(ROLE_KEY) is not None:
            return
        updates = [ROLE_KEY.value_set(self.role.value)]
        if self.agent_id.definition_id:
            updates.append(DEFINITION_KEY.value_set(self.agent_id.definition_id))
        workflow.upsert_search_attributes(updates)

    # -- the loop -----------------------------------------------------------------
    async def _loop(self, given: AgentInput | str | None) -> AgentResult:
        if isinstance(given, Unreadable):  # see ._start: fail the run, once, saying why
            raise lw_error(
                INVALID_REQUEST,
                f"workflow {workflow.info().workflow_id!r} ({self.role.value}) was started "
                f"with an input it cannot use ({given.problem()}); start it with an "
                "AgentInput (e.g. AgentInput(task='...')), a task string or nothing",
            )
        # A plain string is the task, so `execute_workflow("lw.Planner", "Review X")`
        # works as one would expect.
        agent_input = AgentInput(task=given) if isinstance(given, str) else given or AgentInput()
        agent_input.task = clip(agent_input.task, TASK_CAP)
        self._untrusted = agent_input.untrusted
        self._agent_id = check_identity()
        agent_input = trusted_input(self._agent_id, agent_input)
        info = workflow.info()
        self._conversation = info.first_execution_run_id or info.run_id
        self._state = state = agent_input.state or AgentState()
        self._exchanges = list(state.carried)
        self._label_self()
        if state.settings is None:
            state.settings = agent_input.settings or await self._worker_settings()
        self._index_self()
        self._gate.configure(self.agent_id, self.role, state)
        max_turns = self._max_turns = state.settings.turns_for(
            self.role, self.agent_id.definition_id
        )
        if state.tree_budget is None and self.role is not Role.DREAMING:
            cap = state.settings.tree_cap(self.role, self.agent_id.definition_id)
            state.tree_budget = min(cap, agent_input.tree_turns or cap)
        turns_this_run = 0
        while True:
            self._check_turns(max_turns)
            reply = await self._ask_model(agent_input.task)
            state.usage = state.usage + reply.usage
            exchange = Exchange(turn=state.turn, reply=reply)
            self._exchanges.append(exchange)
            summary = await self._act(exchange)
            state.turn += 1
            turns_this_run += 1
            if summary is not None:
                self._status = "finished"
                self._summary = summary
                return AgentResult(
                    workflow_id=str(self.agent_id),
                    role=self.role,
                    definition_id=self.agent_id.definition_id,
                    summary=summary,
                    turns=state.turn,
                    children=list(state.children),
                    failed_tools=state.failed_tools,
                    tree_turns=state.turn + state.tree_used,
                    usage=state.usage,
                    tree_usage=state.usage + state.children_usage,
                )
            self._check_output_limit(reply)
            per_run = agent_input.turns_per_run
            # A dream never continues as new: its input is a DreamInput and its runs are
            # claimed by this run; its turns are bounded by its definition instead.
            if self.role is not Role.DREAMING and (
                workflow.info().is_continue_as_new_suggested()
                or (per_run is not None and turns_this_run >= per_run)
            ):
                self._status = "continuing as new"
                state.carried = _carried(self._exchanges)
                workflow.continue_as_new(agent_input.model_copy(update={"state": state}))

    def _check_turns(self, max_turns: int) -> None:
        state = self._state
        workflow_id = workflow.info().workflow_id
        if state.turn >= max_turns:
            raise lw_error(
                TURN_LIMIT,
                f"workflow {workflow_id!r} used all {max_turns} turns without calling "
                "finish; raise max_turns in its definition or make its instructions end "
                "with finish",
            )
        budget = state.tree_budget
        if budget is not None and state.turn + state.tree_used >= budget:
            raise lw_error(
                TURN_LIMIT,
                f"workflow {workflow_id!r}: its tree (this run and the children it started) "
                f"took all {budget} turns of its budget without finishing; raise "
                "max_tree_turns (its definition, or OrchestratorOptions for a pipeline)",
            )

    def _check_output_limit(self, reply: ModelResponse) -> None:
        state = self._state
        if reply.stop_reason != "max_tokens" or reply.tool_calls:
            state.output_limit_hits = 0
            return
        state.output_limit_hits += 1
        if state.output_limit_hits >= OUTPUT_LIMIT_HITS:
            raise lw_error(
                MODEL_OUTPUT_LIMIT,
                f"workflow {workflow.info().workflow_id!r}: {OUTPUT_LIMIT_HITS} replies in a "
                "row were cut at the model's output token limit; raise max_tokens of the "
                "model adapter",
            )

    def _parent_run(self) -> str | None:
        parent = workflow.info().parent
        return parent.run_id if parent is not None else None

    async def _worker_settings(self) -> WorkerSettings:
        """The worker's settings, once per run tree: a local activity's answer is
        recorded in history, so a replay reads the same settings."""
        settings: WorkerSettings = await self._execute(
            SETTINGS_ACTIVITY,
            SettingsRequest(chain=self._conversation, parent_run=self._parent_run()),
            WorkerSettings,
            start_to_close=timedelta(seconds=30),
            local=True,
            summary="worker settings",
        )
        return settings

    async def _ask_model(self, task: str) -> ModelResponse:
        self._status = "thinking"
        self._running = ["model"]
        state = self._state
        results = self._exchanges[-1].results if self._exchanges else []
        # Results recorded worker-side as they were produced travel as digests only.
        digests = {
            r.call_id: self._digests[r.call_id] for r in results if r.call_id in self._digests
        }
        turn = ModelTurn(
            conversation=self._conversation,
            turn=state.turn,
            task=task if state.turn == 0 else "",
            untrusted=self._untrusted and state.turn == 0,
            results=[r.model_copy(update={"text": ""}) if r.call_id in digests else r
                     for r in results],
            digests=digests,
            parent_run=self._parent_run(),
            prior_run=self._exchanges[-1].reply.run_id if self._exchanges else None,
        )  # fmt: skip
        try:
            return await self._model_activity(turn)
        except (ActivityError, ApplicationError) as err:
            # A local activity's failure arrives as its ApplicationError itself.
            if error_type(err) != CONVERSATION_MISSING:
                raise
        # The worker-side conversation is gone (another data dir, a cleaned .lw):
        # resend what this run holds, once.
        return await self._model_activity(
            turn.model_copy(
                update={
                    "task": task,
                    "results": results,
                    "digests": {},
                    "rebuild": self._exchanges,
                    "untrusted": self._untrusted,
                }
            )
        )

    async def _model_activity(self, turn: ModelTurn) -> ModelResponse:
        local = self._state.settings is not None and self._state.settings.local_model
        reply: ModelResponse = await self._execute(
            MODEL_ACTIVITY,
            turn,
            ModelResponse,
            start_to_close=timedelta(minutes=2 if local else 10),
            heartbeat=None if local else timedelta(seconds=30),
            local=local,
            summary=model_summary(turn.turn),
        )
        return reply
