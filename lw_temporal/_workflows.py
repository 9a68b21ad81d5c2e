"""``lw.Orchestrator``, ``lw.Planner`` and ``lw.Worker``: the agent hierarchy.

Each is the same agent loop in workflow code (ask ``lw.model`` for tool calls, run
them as activities or child workflows, record a bounded result, repeat) with a role
that decides which tools exist: an orchestrator starts planner sub-runs
(``plan_workflow``), a planner starts worker steps (``run_step``), a worker only acts.

Child IDs are deterministic (a counter kept in the workflow's state), so a replay or a
continue-as-new starts exactly the children it started before, and each child checks
at start that its ID extends its parent's: the ID is the run's path on disk, and a
workflow started under a forged ID would otherwise read another run's scratch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from temporalio import workflow
from temporalio.common import (
    RetryPolicy,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)

from ._errors import HIERARCHY_VIOLATION, INVALID_WORKFLOW_ID, NON_RETRYABLE, TURN_LIMIT, lw_error
from ._ids import (
    ORCHESTRATOR_WORKFLOW,
    PLANNER_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    SEARCH_ATTRIBUTE_ROLE,
    WORKER_WORKFLOW,
    InvalidWorkflowId,
    Role,
    RunId,
    parse_workflow_id,
    parse_workflow_id_for_type,
)
from ._memory._models import (
    MemoryAppendRequest,
    MemoryDeleteRequest,
    MemoryListRequest,
    MemoryReadRequest,
    MemoryReplaceRequest,
    MemoryWriteRequest,
)
from ._model import MODEL_ACTIVITY, ModelReply, ModelTurn, ToolCall, TranscriptEntry
from ._telemetry._summary import command_summary, memory_summary, model_summary

#: Transcript entries the model sees each turn; older ones are counted, not sent.
TRANSCRIPT_WINDOW = 24
#: UTF-8 bytes of one tool result kept in the transcript; the full output stays in the
#: file the tool saved (``ref``), so the model can read it with bash when it needs to.
TOOL_TEXT_CAP = 1024
#: UTF-8 bytes of a memory read or listing kept in the transcript (and asked for, when
#: the model names no size): memory is what agents are meant to read in full.
MEMORY_TEXT_CAP = 4096
MEMORY_LIST_LIMIT = 200
#: UTF-8 bytes of model text and of each tool-call argument kept in the transcript.
MODEL_TEXT_CAP = 2048
#: UTF-8 bytes of each text kept for entries older than the last turn. Every turn
#: re-sends the window to the model, so this (not TOOL_TEXT_CAP) is what a long
#: output costs the history on each later turn; the full text stays behind ``ref``.
OLDER_TEXT_CAP = 160
#: UTF-8 bytes of a run's task (sent to the model each turn); longer context is meant
#: to travel as files in scratch, which children read through their mounts.
TASK_CAP = 16 * 1024
#: Default command timeout when the model gives none (lw.bash enforces its own too).
BASH_DEFAULT_TIMEOUT = 600.0

PROGRESS_QUERY = "lw.progress"
MEMO_ROLE = "lw.role"
MEMO_DEFINITION = "lw.definition"

ROLE_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_ROLE)
DEFINITION_KEY = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION)

# Tool name -> (activity, request model). The workflow validates a model's arguments
# before scheduling, so a malformed call comes straight back to the model as a tool
# error instead of failing the activity's input decoding and burning retries.
_MEMORY_TOOLS: dict[str, tuple[str, type[BaseModel]]] = {
    "memory_read": ("lw.memory.read", MemoryReadRequest),
    "memory_write": ("lw.memory.write", MemoryWriteRequest),
    "memory_append": ("lw.memory.append", MemoryAppendRequest),
    "memory_list": ("lw.memory.list", MemoryListRequest),
    "memory_delete": ("lw.memory.delete", MemoryDeleteRequest),
    "memory_replace": ("lw.memory.replace", MemoryReplaceRequest),
}
_CHILD_TOOL = {Role.ORCHESTRATOR: "plan_workflow", Role.PLANNER: "run_step"}
_BASH_FIELDS = ("exit_code", "stdout", "stderr", "rejection")

_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
    non_retryable_error_types=list(NON_RETRYABLE),
)


class AgentState(BaseModel):
    """Everything the loop knows, carried across continue-as-new."""

    turn: int = 0
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    omitted: int = 0
    next_child: int = 1
    children: list[str] = Field(default_factory=list)
    children_finished: int = 0
    failed_tools: int = 0
    max_turns: int | None = None
    index_search_attributes: bool = False
    local_model: bool = False


class AgentInput(BaseModel):
    """A run's input: its task (from the client or the parent) and loop options.

    ``turns_per_run`` continues-as-new after that many turns even when Temporal does
    not suggest it yet (it always does when a history grows large); ``local_model`` is
    set by a parent whose worker calls the model as a local activity, so the child's
    first turn does too; ``state`` is set only by the workflow itself when it continues
    as new.
    """

    task: str = ""
    turns_per_run: int | None = Field(default=None, gt=0)
    local_model: bool = False
    state: AgentState | None = None


class AgentResult(BaseModel):
    workflow_id: str
    role: Role
    definition_id: str | None
    summary: str
    turns: int
    children: list[str] = Field(default_factory=list)


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


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` UTF-8 bytes, saying what was cut."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text
    marker = f"\n...[{len(data)} bytes, middle cut]...\n".encode()
    keep = max(limit - len(marker), 0)
    head, tail = data[: keep * 2 // 3], data[len(data) - keep // 3 :] if keep // 3 else b""
    return (head + marker + tail).decode("utf-8", "ignore")


def _clip_call(call: ToolCall) -> ToolCall:
    args = {
        key: clip(value, MODEL_TEXT_CAP) if isinstance(value, str) else value
        for key, value in call.arguments.items()
    }
    return ToolCall(name=call.name, arguments=args, id=call.id)


def _compact(entry: TranscriptEntry) -> TranscriptEntry:
    """An older entry as the model sees it: a short head and tail of each text."""
    return entry.model_copy(
        update={
            "text": clip(entry.text, OLDER_TEXT_CAP),
            "tool_calls": [
                ToolCall(
                    name=c.name,
                    id=c.id,
                    arguments={
                        k: clip(v, OLDER_TEXT_CAP) if isinstance(v, str) else v
                        for k, v in c.arguments.items()
                    },
                )
                for c in entry.tool_calls
            ],
        }
    )


def _render_memory(tool_name: str, result: dict[str, Any]) -> str:
    """A memory result as the model reads it: contents and listings as text."""
    if tool_name == "memory_read" and "content" in result:
        if not result.get("exists", True):
            return f"{result.get('path')}: no such file"
        head = (
            f"{result.get('path')} ({result.get('size')} bytes, "
            f"sha256 {result.get('content_sha256')})"
        )
        if result.get("truncated"):
            shown = result.get("offset", 0) + len(str(result["content"]).encode())
            head += f"; truncated: read on with offset={shown}"
        return clip(f"{head}\n{result['content']}", MEMORY_TEXT_CAP)
    if tool_name == "memory_list" and "entries" in result:
        lines = [f"{result.get('path')}:"]
        lines += [
            f"{e.get('path')} ({e.get('kind')}, {e.get('size')} bytes)"
            for e in result["entries"]
            if isinstance(e, dict)
        ]
        if result.get("truncated"):
            lines.append("(listing truncated: list a subfolder or raise limit)")
        return clip("\n".join(lines), MEMORY_TEXT_CAP)
    return clip(json.dumps(result, sort_keys=True, default=str), TOOL_TEXT_CAP)


def _render_bash(result: dict[str, Any]) -> tuple[str, str | None]:
    """A bash result as transcript text, and the first saved-output reference."""
    lines = [f"exit_code: {result.get('exit_code')}"]
    if result.get("rejection"):
        lines.append(f"rejected: {result['rejection']}")
    extras = {
        k: v
        for k, v in result.items()
        if k not in _BASH_FIELDS and v not in (None, False, "", [], {})
    }
    ref = next(
        (v for k, v in extras.items() if isinstance(v, str) and v.startswith("/mnt/")),
        None,
    )
    if extras:
        lines.append(clip(json.dumps(extras, sort_keys=True, default=str), 256))
    for stream in ("stdout", "stderr"):
        value = result.get(stream) or ""
        if value:
            lines.append(f"{stream}:\n{value}")
    return clip("\n".join(lines), TOOL_TEXT_CAP), ref


def _failure_text(err: BaseException) -> str:
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


class _Agent:
    """The loop shared by all three roles; subclasses fix the workflow type."""

    role: Role

    def __init__(self) -> None:
        self._run_id: RunId | None = None
        self._state = AgentState()
        self._status = "starting"
        self._running: list[str] = []
        self._summary: str | None = None

    # -- identity -----------------------------------------------------------------
    def _check_identity(self) -> RunId:
        """Refuse an ID outside the grammar, of another role, or not under its parent."""
        info = workflow.info()
        try:
            run_id = parse_workflow_id_for_type(info.workflow_id, info.workflow_type)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_WORKFLOW_ID, str(err)) from None
        expected = run_id.parent
        actual = info.parent.workflow_id if info.parent else None
        if expected is not None and actual != str(expected):
            started_by = f"workflow {actual!r}" if actual else "a client"
            raise lw_error(
                HIERARCHY_VIOLATION,
                f"workflow {info.workflow_id!r} was started by {started_by}, but its ID "
                f"places it under {str(expected)!r}; only that {expected.role.value} may "
                f"start it (start a standalone run with an ID like "
                f"'run_<definition>@<token>' or 'pipeline_<token>' instead)",
            )
        if expected is None and info.parent is not None:
            parent_type = _parent_role(info.parent.workflow_id)
            if parent_type is not None:
                raise lw_error(
                    HIERARCHY_VIOLATION,
                    f"workflow {info.workflow_id!r} is a top-level ID but was started by lw "
                    f"{parent_type.value} {info.parent.workflow_id!r}; children of an lw "
                    "workflow must extend its ID",
                )
        return run_id

    @property
    def run_id(self) -> RunId:
        assert self._run_id is not None
        return self._run_id

    # -- visibility ---------------------------------------------------------------
    @workflow.query(name=PROGRESS_QUERY)
    def progress(self) -> Progress:
        return Progress(
            workflow_id=workflow.info().workflow_id,
            role=self.role,
            definition_id=self._run_id.definition_id if self._run_id else None,
            status=self._status,
            turn=self._state.turn,
            max_turns=self._state.max_turns,
            running=list(self._running),
            children_started=len(self._state.children),
            children_finished=self._state.children_finished,
            children=list(self._state.children),
            failed_tools=self._state.failed_tools,
            summary=self._summary,
        )

    def _label(self) -> dict[str, str]:
        return {MEMO_ROLE: self.role.value, MEMO_DEFINITION: self.run_id.definition_id or ""}

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
        if not self._state.index_search_attributes:
            return
        if workflow.info().typed_search_attributes.get(ROLE_KEY) is not None:
            return
        updates = [ROLE_KEY.value_set(self.role.value)]
        if self.run_id.definition_id:
            updates.append(DEFINITION_KEY.value_set(self.run_id.definition_id))
        workflow.upsert_search_attributes(updates)

    # -- the loop -----------------------------------------------------------------
    async def _loop(self, given: AgentInput | str | None) -> AgentResult:
        # A plain string is the task, so `execute_workflow("lw.Planner", "Review X")`
        # works as one would expect.
        agent_input = AgentInput(task=given) if isinstance(given, str) else given or AgentInput()
        # Every turn re-sends the task: long context belongs in scratch files.
        agent_input.task = clip(agent_input.task, TASK_CAP)
        self._run_id = self._check_identity()
        self._state = agent_input.state or AgentState(local_model=agent_input.local_model)
        self._label_self()
        turns_this_run = 0
        while True:
            state = self._state
            if state.max_turns is not None and state.turn >= state.max_turns:
                raise lw_error(
                    TURN_LIMIT,
                    f"workflow {workflow.info().workflow_id!r} used all {state.max_turns} "
                    "turns without calling finish; raise max_turns in its definition or "
                    "make its instructions end with finish",
                )
            reply = await self._ask_model(agent_input.task)
            if state.max_turns is None:
                state.max_turns = reply.max_turns
                state.index_search_attributes = reply.index_search_attributes
                state.local_model = reply.local_activity
                self._index_self()
            summary = await self._act(reply)
            state.turn += 1
            turns_this_run += 1
            if summary is not None:
                self._status = "finished"
                self._summary = summary
                return AgentResult(
                    workflow_id=str(self.run_id),
                    role=self.role,
                    definition_id=self.run_id.definition_id,
                    summary=summary,
                    turns=state.turn,
                    children=list(state.children),
                )
            per_run = agent_input.turns_per_run
            if workflow.info().is_continue_as_new_suggested() or (
                per_run is not None and turns_this_run >= per_run
            ):
                self._status = "continuing as new"
                workflow.continue_as_new(agent_input.model_copy(update={"state": state}))

    async def _ask_model(self, task: str) -> ModelReply:
        self._status = "thinking"
        self._running = ["model"]
        state = self._state
        window = state.transcript[-TRANSCRIPT_WINDOW:]
        latest = state.turn - 1
        turn = ModelTurn(
            turn=state.turn,
            task=task,
            transcript=[e if e.turn >= latest else _compact(e) for e in window],
            omitted=state.omitted + len(state.transcript) - len(window),
        )
        reply: ModelReply
        if state.local_model:
            reply = await workflow.execute_local_activity(
                MODEL_ACTIVITY,
                turn,
                result_type=ModelReply,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=_RETRY,
                summary=model_summary(state.turn),
            )
        else:
            reply = await workflow.execute_activity(
                MODEL_ACTIVITY,
                turn,
                result_type=ModelReply,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=_RETRY,
                summary=model_summary(state.turn),
            )
        return reply

    def _record(self, entry: TranscriptEntry) -> None:
        state = self._state
        state.transcript.append(entry)
        if not entry.ok:
            state.failed_tools += 1
        # The state itself travels through continue-as-new: keep it as bounded as
        # the window the model sees.
        excess = len(state.transcript) - TRANSCRIPT_WINDOW
        if excess > 0:
            del state.transcript[:excess]
            state.omitted += excess

    async def _act(self, reply: ModelReply) -> str | None:
        """Run the reply's tool calls in order (consecutive child starts together);
        return the summary if the model finished (``finish``, or no tool call at all)."""
        turn = self._state.turn
        self._record(
            TranscriptEntry(
                kind="assistant",
                turn=turn,
                text=clip(reply.text, MODEL_TEXT_CAP),
                tool_calls=[_clip_call(c) for c in reply.tool_calls],
            )
        )
        calls = reply.tool_calls
        if not calls:
            # A model that answers without calling a tool is done, as in every chat
            # API's tool loop; its text is the summary.
            self._running = []
            return reply.text or "finished"
        child_tool = _CHILD_TOOL.get(self.role)
        index = 0
        while index < len(calls):
            call = calls[index]
            if call.name == "finish":
                self._running = []
                return str(call.arguments.get("summary", "")) or "finished"
            if call.name == child_tool:
                group: list[ToolCall] = []
                while index < len(calls) and calls[index].name == child_tool:
                    group.append(calls[index])
                    index += 1
                self._status = "waiting for children"
                self._running = [f"{len(group)} x {child_tool}"]
                entries = await asyncio.gather(*self._start_children(group, turn))
                for entry in entries:
                    self._record(entry)
                continue
            self._status = "running tools"
            self._running = [call.name]
            self._record(await self._tool(call, turn))
            index += 1
        self._running = []
        return None

    # -- tools --------------------------------------------------------------------
    async def _tool(self, call: ToolCall, turn: int) -> TranscriptEntry:
        def entry(text: str, ok: bool = True, ref: str | None = None) -> TranscriptEntry:
            return TranscriptEntry(
                kind="tool", turn=turn, call_id=call.id, tool=call.name, text=text, ok=ok, ref=ref
            )

        try:
            if call.name == "bash":
                text, ok, ref = await self._bash(call)
                return entry(text, ok, ref)
            memory_tool = _MEMORY_TOOLS.get(call.name)
            if memory_tool is None:
                allowed = [
                    "bash",
                    *_MEMORY_TOOLS,
                    *_CHILD_TOOL.get(self.role, "").split(),
                    "finish",
                ]
                return entry(
                    f"unknown tool {call.name!r} for the {self.role.value}; "
                    f"available: {', '.join(allowed)}",
                    ok=False,
                )
            activity_name, request_model = memory_tool
            arguments = dict(call.arguments)
            try:
                request_model.model_validate(arguments)
            except ValidationError as err:
                return entry(
                    clip(f"{call.name}: invalid arguments: {err}", TOOL_TEXT_CAP), ok=False
                )
            # Reads and listings default to what the transcript keeps, so a store's
            # size never decides how much lands in the history.
            if call.name == "memory_read":
                arguments.setdefault("max_bytes", MEMORY_TEXT_CAP)
            elif call.name == "memory_list":
                arguments.setdefault("limit", MEMORY_LIST_LIMIT)
            result: dict[str, Any] = await workflow.execute_activity(
                activity_name,
                arguments,
                result_type=dict,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_RETRY,
                summary=memory_summary(call.name, arguments.get("path")),
            )
            return entry(_render_memory(call.name, result))
        except ActivityError as err:
            if is_cancelled_exception(err):
                raise
            return entry(clip(_failure_text(err), TOOL_TEXT_CAP), ok=False)

    async def _bash(self, call: ToolCall) -> tuple[str, bool, str | None]:
        """Run ``lw.bash``; return the transcript text, success, and the saved output."""
        command = call.arguments.get("command")
        if not isinstance(command, str):
            return "bash needs a 'command' string argument", False, None
        raw_timeout = call.arguments.get("timeout_seconds")
        timeout = (
            float(raw_timeout)
            if isinstance(raw_timeout, int | float) and 0 < raw_timeout < float("inf")
            else None
        )
        result: dict[str, Any] = await workflow.execute_activity(
            "lw.bash",
            {"command": command, "timeout_seconds": timeout},
            result_type=dict,
            start_to_close_timeout=timedelta(seconds=(timeout or BASH_DEFAULT_TIMEOUT) + 60),
            heartbeat_timeout=timedelta(seconds=30),
            retry_policy=_RETRY,
            summary=command_summary(command),
        )
        text, ref = _render_bash(result)
        return text, result.get("exit_code") == 0 and not result.get("rejection"), ref

    def _start_children(
        self, calls: Sequence[ToolCall], turn: int
    ) -> list[Coroutine[Any, Any, TranscriptEntry]]:
        """Assign each child its ID now, in call order, so IDs never depend on timing."""
        return [self._child(call, turn, self._next_child_id(call)) for call in calls]

    def _next_child_id(self, call: ToolCall) -> RunId | str:
        """The next child's ID, or why the call cannot start one."""
        token = str(self._state.next_child)
        try:
            if self.role is Role.ORCHESTRATOR:
                definition = str(call.arguments.get("workflow", ""))
                child_id = self.run_id.sub_run(definition, token)
            else:
                child_id = self.run_id.step_run(token)
        except (InvalidWorkflowId, ValueError) as err:
            return f"cannot start {call.name}: {err}"
        self._state.next_child += 1
        self._state.children.append(str(child_id))
        return child_id

    async def _child(self, call: ToolCall, turn: int, child_id: RunId | str) -> TranscriptEntry:
        def entry(text: str, ok: bool = True) -> TranscriptEntry:
            return TranscriptEntry(
                kind="tool",
                turn=turn,
                call_id=call.id,
                tool=call.name,
                text=clip(text, TOOL_TEXT_CAP),
                ok=ok,
                ref=None if isinstance(child_id, str) else str(child_id),
            )

        if isinstance(child_id, str):
            return entry(child_id, ok=False)
        state = self._state
        task = clip(str(call.arguments.get("task", "")), TASK_CAP)
        child_type = child_id.workflow_type
        child_role = child_id.role
        try:
            result: AgentResult = await workflow.execute_child_workflow(
                child_type,
                AgentInput(task=task, local_model=state.local_model),
                id=str(child_id),
                result_type=AgentResult,
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                cancellation_type=workflow.ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
                memo={MEMO_ROLE: child_role.value, MEMO_DEFINITION: child_id.definition_id or ""},
                search_attributes=(
                    self._search_attributes(child_role, child_id.definition_id)
                    if state.index_search_attributes
                    else None
                ),
                static_summary=clip(f"{child_role.value}: {task}", 200),
            )
        except ChildWorkflowError as err:
            if is_cancelled_exception(err):
                raise
            self._state.children_finished += 1
            return entry(f"{child_id} failed: {_failure_text(err)}", ok=False)
        except WorkflowAlreadyStartedError as err:
            return entry(f"{child_id} did not start: {err}", ok=False)
        self._state.children_finished += 1
        return entry(f"{child_id} finished: {result.summary}")


def _parent_role(workflow_id: str) -> Role | None:
    try:
        return parse_workflow_id(workflow_id).role
    except InvalidWorkflowId:
        return None


@workflow.defn(name=ORCHESTRATOR_WORKFLOW)
class Orchestrator(_Agent):
    """A pipeline: reads every workflow's lessons, starts planner sub-runs, writes
    pipeline memory."""

    role = Role.ORCHESTRATOR

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


@workflow.defn(name=PLANNER_WORKFLOW)
class Planner(_Agent):
    """One run of a workflow definition: plans, curates memory, starts worker steps."""

    role = Role.PLANNER

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


@workflow.defn(name=WORKER_WORKFLOW)
class Worker(_Agent):
    """One step of a planner's run."""

    role = Role.WORKER

    @workflow.run
    async def run(self, agent_input: AgentInput | str | None = None) -> AgentResult:
        return await self._loop(agent_input)


WORKFLOWS: tuple[type, ...] = (Orchestrator, Planner, Worker)
