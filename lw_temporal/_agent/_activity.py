"""``lw.model`` and ``lw.settings``: the worker side of each agent turn.

Workflow code sends ``lw.model`` the new results of a turn (a :class:`ModelTurn`); the
activity adds what only the worker may know (the mount description derived from
``activity.info()``, the definition's instructions, the tools of the role, the whole
conversation from the worker-side store, fitted to the context budget, its older turns
compacted into a summary the model writes once clearing no longer leaves room), asks the
:class:`Model`, records the reply as the turn's file and returns it. Its input and its
output are what is new in the turn, never a re-sent conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from pydantic import Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._config import LwConfig
from .._edit import memory_lines
from .._ids import Role
from .._scope import Scope
from .._taint import TaintBook
from ..errors._kinds import CONVERSATION_MISSING, MODEL_CONTEXT_OVERFLOW, MODEL_FAILED, lw_error
from ._compaction import (
    keep_from,
    model_free_summary,
    summary_block,
    summary_cap,
)
from ._conversation import (
    BYTES_PER_TOKEN,
    DEFAULT_CONTEXT_BUDGET,
    ConversationMissing,
    ConversationStore,
    Summary,
    TurnRecord,
    exchanges_of,
    fit,
    on_lineage,
    tokens,
)
from ._io import ORCHESTRATOR_MAX_TURNS, Bounds, WorkerSettings
from ._protocol import (
    Exchange,
    Model,
    ModelRequest,
    ModelResponse,
    ToolResult,
    ToolSpec,
    Usage,
    Wire,
)
from ._recorder import recorded, tool_activity_id
from ._registry import tools_for
from ._replies import clean_text, normalized
from ._saves import drop_saved, save_cleared, save_transcript
from ._tools import clip

MODEL_ACTIVITY = "lw.model"
SETTINGS_ACTIVITY = "lw.settings"

#: What an orchestrator is told when ``OrchestratorOptions`` gives no instructions.
DEFAULT_ORCHESTRATOR_INSTRUCTIONS = (
    "You orchestrate a pipeline of the workflows listed below. Read their lessons under "
    "/mnt/memory/available-workflows/ and the pipeline's history under "
    "/mnt/memory/pipeline/ first. Write what the planners need to know to "
    "/mnt/scratch/own/ (they read it under /mnt/scratch/from-orchestrator/), start each "
    "workflow the task needs with plan_workflow (in parallel when they do not depend on "
    "each other), record what this run learned in /mnt/memory/pipeline/, then finish "
    "with the outcome."
)
#: Turns left at which the model is told its budget is running out.
TURNS_WARNING = 3

_HEARTBEAT_SECONDS = 5.0


class ModelTurn(Wire):
    """What workflow code sends ``lw.model``: what is new this turn, never scope."""

    #: The conversation's key: the run chain's first run id (stable across
    #: continue-as-new, new when a workflow id is reused).
    conversation: str = Field(pattern=r"^[A-Za-z0-9-]{1,64}$")
    turn: int = Field(ge=0)
    #: The run's task, sent at turn 0 and with a rebuild only.
    task: str = ""
    #: The results answering the previous turn's tool calls.
    results: list[ToolResult] = Field(default_factory=list)
    #: Results sent without their text, by call id: the digest of the text recorded on
    #: the worker that ran the tool (``_recorder``).
    digests: dict[str, str] = Field(default_factory=dict)
    #: Sent only after the activity reported its conversation files missing.
    rebuild: list[Exchange] | None = None
    #: The run that asked the previous turn, as the reply this run holds says
    #: (``ModelResponse.run_id``): stored turns another run asked in its place (the
    #: branch of a reset this run's lineage is not on) are not this run's conversation.
    prior_run: str | None = Field(default=None, max_length=64)
    #: Set with the task when its starter marked it untrusted (``AgentInput.untrusted``):
    #: the worker taints the run before the model reads it. It can only add taint.
    untrusted: bool = False
    #: The parent's run id (a child's); with ``conversation`` it confirms a local
    #: activity's caller without asking the server (``_callers``).
    parent_run: str | None = Field(default=None, max_length=64)


class SettingsRequest(Wire):
    """What ``lw.settings`` gets from its workflow: only what confirms its caller when
    it runs as a local activity (the chain's first run id, the parent's run id)."""

    chain: str | None = Field(default=None, max_length=64)
    parent_run: str | None = Field(default=None, max_length=64)


class ModelActivities:
    """Holds the model and the worker's configuration; registers ``lw.model`` and
    ``lw.settings``."""

    def __init__(
        self,
        config: LwConfig,
        model: Model,
        *,
        index_search_attributes: bool = False,
        local_activity: bool = False,
        orchestrator_instructions: str = "",
        orchestrator_max_turns: int = ORCHESTRATOR_MAX_TURNS,
        orchestrator_bounds: Bounds | None = None,
        context_budget_tokens: int = DEFAULT_CONTEXT_BUDGET,
        dreaming_instructions: Callable[[str], str] | None = None,
        dreaming_max_turns: int = ORCHESTRATOR_MAX_TURNS,
        taint: TaintBook | None = None,
    ) -> None:
        self.config = config
        #: The worker's taint book: a task marked untrusted taints its run.
        self.taint = taint
        #: The dreaming agent's instructions for a target (the plugin's
        #: ``DreamingAgentOptions``), and its turn budget.
        self.dreaming_instructions = dreaming_instructions or (lambda target: "")
        self.dreaming_max_turns = dreaming_max_turns
        self.model = model
        self.index_search_attributes = index_search_attributes
        self.local_activity = local_activity
        self.orchestrator_instructions = orchestrator_instructions
        self.orchestrator_max_turns = orchestrator_max_turns
        self.orchestrator_bounds = orchestrator_bounds or WorkerSettings().orchestrator_bounds
        self.context_budget_tokens = context_budget_tokens
        self.conversations = ConversationStore(config.layout.conversations)
        #: The model is sent the provider's native tools (``AnthropicModel``'s
        #: ``native_tools``), whose definitions are the provider's, not lw's schemas.
        self.native_tools = bool(getattr(model, "native_tools", False))

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (self.run_turn, self.settings)

    def worker_settings(self) -> WorkerSettings:
        return WorkerSettings(
            index_search_attributes=self.index_search_attributes,
            local_model=self.local_activity,
            orchestrator_max_turns=self.orchestrator_max_turns,
            max_turns={d.id: d.max_turns for d in self.config.definitions.values()},
            approvals={d.id: d.approvals for d in self.config.definitions.values() if d.approvals},
            dreaming_max_turns=self.dreaming_max_turns,
            bounds={
                d.id: Bounds(
                    children_per_turn=d.max_children_per_turn,
                    children=d.max_children,
                    tree_turns=d.max_tree_turns,
                )
                for d in self.config.definitions.values()
            },
            orchestrator_bounds=self.orchestrator_bounds,
        )

    @activity.defn(name=SETTINGS_ACTIVITY)
    async def settings(self, request: SettingsRequest | None = None) -> WorkerSettings:
        """Read once per run tree; children get the answer in their input. A top-level
        run's first activity, so its caller check also claims the run's workflow ID."""
        request = request or SettingsRequest()
        scope = self.config.caller_scope()
        await self.config.callers.verify(
            scope.agent_id, chain=request.chain, parent_run=request.parent_run
        )
        return self.worker_settings().model_copy(update={"pin": self.config.topology.pin_here()})

    def _prompt_parts(self, scope: Scope) -> tuple[str, dict[str, str]]:
        if scope.role is Role.ORCHESTRATOR:
            available = {
                d.id: d.description or d.instructions[:200]
                for d in self.config.definitions.values()
            }
            instructions = self.orchestrator_instructions or DEFAULT_ORCHESTRATOR_INSTRUCTIONS
            return instructions, available
        if scope.role is Role.DREAMING:
            return self.dreaming_instructions(scope.agent_id.definition_id or ""), {}
        definition = scope.definition
        return ("" if definition is None else definition.instructions), {}

    def request_for(
        self,
        scope: Scope,
        turn: ModelTurn,
        records: list[TurnRecord],
        summary: Summary | None = None,
    ) -> tuple[ModelRequest, bool]:
        """The whole request of a turn, fitted into the context budget (the turns a
        ``summary`` covers replaced by it), and whether it should be compacted."""
        instructions, available = self._prompt_parts(scope)
        # The budget the model is told is the one the workflow enforces: one policy.
        max_turns = self.worker_settings().turns_for(scope.role, scope.agent_id.definition_id)
        task = records[0].task if records else turn.task
        lines = memory_lines(scope)
        request = ModelRequest(
            role=scope.role,
            workflow_id=scope.workflow_id,
            definition_id=scope.agent_id.definition_id,
            turn=turn.turn,
            max_turns=max_turns,
            mounts=scope.describe(),
            instructions=instructions,
            task=task,
            tools=[t.spec() for t in tools_for(scope.role)],
            available_workflows=available,
            summary="" if summary is None else summary_block(summary.text, summary.upto),
            memories=(
                "Claude's memory tool sees the memory mounts under /memories (the same "
                "files, the same modes), and its text editor edits files of any mount:\n"
                + "\n".join(lines)
            )
            if lines
            else "",
        )
        left = max_turns - turn.turn
        if left <= TURNS_WARNING:
            request.notes.append(
                f"{left} turn{'s' if left != 1 else ''} left of {max_turns}: wrap up and "
                "call finish."
            )
        native = self.native_tools
        fixed = (
            len(request.system_prompt(native_tools=True).encode())
            + len(task.encode())
            + len(request.summary.encode())
            + sum(_tool_bytes(t, native) for t in request.offered(native=native))
        )
        history = exchanges_of(records, turn.results)[0 if summary is None else summary.upto :]
        fitted = fit(history, fixed, self.context_budget_tokens, lambda r: save_cleared(scope, r))
        request.history = fitted.exchanges
        request.cleared_results = fitted.cleared
        request.stable_results = fitted.stable
        return request, fitted.compact and (summary is None or summary.made_at < turn.turn)

    def _room(self, request: ModelRequest) -> int:
        used = len(request.system_prompt(native_tools=True).encode()) + len(request.task.encode())
        return max(self.context_budget_tokens * BYTES_PER_TOKEN - used, 0)

    async def _compact(
        self,
        scope: Scope,
        folder: Path,
        turn: ModelTurn,
        records: list[TurnRecord],
        request: ModelRequest,
        summary: Summary | None,
    ) -> Summary:
        """Ask the model to summarise the conversation, keep the newest turns verbatim
        and record the summary; the compacted turns are saved in full in scratch."""
        first = 0 if summary is None else summary.upto
        full = exchanges_of(records, turn.results)
        room = self._room(request)
        upto = first + keep_from(full[first:], room)
        if upto <= first:
            upto = min(first + 1, len(full) - 1)
        asked = request.model_copy(update={"summarize": True, "notes": []})
        response = await self._ask(asked)
        # Untrusted like any reply: a lone surrogate would fail this turn at every retry.
        text = clean_text(response.text).strip()
        text = text or model_free_summary(request.summary, full[first:upto])
        usage = (
            response.usage if response.usage.model_calls else response.usage + Usage(model_calls=1)
        )
        save_transcript(scope, full[first:upto])
        made = Summary(made_at=turn.turn, upto=upto, text=clip(text, summary_cap(room)),
                       usage=usage)  # fmt: skip
        return self.conversations.put_summary(folder, made)

    @activity.defn(name=MODEL_ACTIVITY)
    async def run_turn(self, turn: ModelTurn) -> ModelResponse:
        scope = await self.config.activity_scope(
            chain=turn.conversation, parent_run=turn.parent_run
        )
        if turn.untrusted and self.taint is not None:
            self.taint.taint(
                scope.workflow_id, "task", "its starter marked the task untrusted "
                "(AgentInput(untrusted=True))",
            )  # fmt: skip
        elif self.taint is not None:
            # A tainted child's summary reaches the model in this turn's results: record
            # the run's taint through its tree before the model reads it, so a child it
            # starts next (an orchestrator's next planner, whose ID is no descendant of
            # the tainted one) finds a tainted ancestor. One stat for an untainted tree.
            self.taint.status(scope.workflow_id)
        folder = self.conversations.folder(scope.agent_id.segments, turn.conversation)
        if turn.rebuild is not None:
            dropped = self.conversations.drop_other_lineage(folder, turn.rebuild)
            if dropped is not None:
                drop_saved(scope, dropped)
            self.conversations.rebuild(folder, turn.task, turn.rebuild, turn.turn)
        run_id = activity.info().workflow_run_id
        done = self.conversations.get(folder, turn.turn)
        if done is not None and done.run_id not in (None, run_id):
            # Another run of the chain asked this turn (a continue-as-new never asks a
            # turn again): the workflow was reset, or retried, to before it, and what it
            # was answered belongs to the branch left behind. Ask anew.
            self.conversations.drop_from(folder, turn.turn)
            drop_saved(scope, turn.turn)  # its saves in scratch too, before they are kept
            done = None
        if done is not None:
            # An earlier attempt (or another worker) already asked the model: same answer.
            return done.asked()
        try:
            records = self.conversations.load(folder, turn.turn)
        except ConversationMissing as err:
            raise ApplicationError(
                f"workflow {scope.workflow_id!r}: turn {err.turn + 1} of conversation "
                f"{turn.conversation} is not in {folder}; the workflow resends it",
                type=CONVERSATION_MISSING,
                non_retryable=True,
            ) from None
        if turn.rebuild is None and not on_lineage(records, turn.prior_run):
            # A reset's branch asked the turns from some point on in place of this run's
            # lineage (this run was reset, to before that point, from a run the branch
            # is not of): the workflow resends its own, which replace them.
            raise ApplicationError(
                f"workflow {scope.workflow_id!r}: turn {turn.turn} of conversation "
                f"{turn.conversation} in {folder} is another branch's (a reset); the "
                "workflow resends its own",
                type=CONVERSATION_MISSING,
                non_retryable=True,
            )
        if turn.digests:
            turn = turn.model_copy(update={"results": self._recorded(scope, turn, records)})
        summary = self.conversations.summary(folder, turn.turn)
        request, compact = self.request_for(scope, turn, records, summary)
        if compact:
            summary = await self._compact(scope, folder, turn, records, request, summary)
            request, _ = self.request_for(scope, turn, records, summary)
        if tokens(len(request.model_dump_json().encode())) > self.context_budget_tokens * 2:
            raise lw_error(
                MODEL_CONTEXT_OVERFLOW,
                f"workflow {scope.workflow_id!r}, turn {turn.turn + 1}: the newest tool "
                "results alone exceed the context budget; raise the plugin's "
                "ModelCallOptions.context_budget_tokens or lower its BashOptions.output_cap",
            )
        response = await self._ask(request)
        reply = normalized(response, turn.turn)
        if summary is not None and summary.made_at == turn.turn:
            # The summarising call is part of this turn's cost.
            reply = reply.model_copy(update={"usage": reply.usage + summary.usage})
        record = TurnRecord(
            turn=turn.turn,
            task=request.task if turn.turn == 0 else "",
            results=turn.results,
            reply=reply,
            run_id=run_id,
        )
        return self.conversations.put(folder, record).asked()

    def _recorded(
        self, scope: Scope, turn: ModelTurn, records: list[TurnRecord]
    ) -> list[ToolResult]:
        """The turn's results with the texts recorded when their tools ran."""
        calls = records[-1].reply.tool_calls if records else []
        index = {call.id: i for i, call in enumerate(calls)}
        run = activity.info().workflow_run_id or ""
        filled = []
        for result in turn.results:
            sha = turn.digests.get(result.call_id)
            if sha is None:
                filled.append(result)
                continue
            text = None
            if result.call_id in index:
                activity_id = tool_activity_id(records[-1].turn, index[result.call_id])
                text = recorded(self.conversations.root, scope.workflow_id, run, activity_id, sha)
            if text is None:
                raise ApplicationError(
                    f"workflow {scope.workflow_id!r}: the result of call {result.call_id} "
                    f"(turn {turn.turn}) is not recorded on this worker; the workflow resends it",
                    type=CONVERSATION_MISSING,
                    non_retryable=True,
                )
            filled.append(result.model_copy(update={"text": text}))
        return filled

    async def _ask(self, request: ModelRequest) -> ModelResponse:
        heartbeat = asyncio.create_task(_heartbeat_forever())
        try:
            return await self.model.next_turn(request)
        except (asyncio.CancelledError, ApplicationError):
            raise
        except Exception as err:
            raise lw_error(
                MODEL_FAILED,
                f"workflow {request.workflow_id!r}: the model failed on turn "
                f"{request.turn + 1}: {type(err).__name__}: {err}",
            ) from err
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat


#: Input tokens the provider adds for each of its native tools (its documented
#: tool-use overhead: bash 245, the text editor 700; the memory tool taken as the editor).
NATIVE_TOOL_TOKENS = {"bash_20250124": 245, "text_editor_20250728": 700, "memory_20250818": 700}


def _tool_bytes(spec: ToolSpec, native: bool) -> int:
    """What a tool's definition adds to every request, in budget bytes."""
    if native and spec.native in NATIVE_TOOL_TOKENS:
        return NATIVE_TOOL_TOKENS[spec.native] * BYTES_PER_TOKEN
    return len(str(spec.parameters)) + len(spec.description)


async def _heartbeat_forever() -> None:
    """A slow model call must not look like a dead worker. The first beat comes after
    ``_HEARTBEAT_SECONDS``, well inside the heartbeat timeout: a call answered sooner
    (most turns of a fast model) costs the server no heartbeat request."""
    while True:
        await asyncio.sleep(_HEARTBEAT_SECONDS)
        activity.heartbeat()
