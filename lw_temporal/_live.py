"""A run's tree, live, in the terminal: what ``lw-temporal run``, ``status`` and the
demo show.

The tree is what the ``lw.progress`` query of each workflow describes: each agent's
role, definition, turn, what it is doing and its tokens, with its latest model text
and, while a command runs, the newest lines of its output (from the running ``lw.bash``
activity's heartbeat details, which ``describe()`` shows and the history never holds).
On a terminal the tree is redrawn in place; piped, each change is one plain line (the
command output left out), so logs stay readable. Every workflow of the tree that
failed is named with its whole chain of causes. Whatever an agent wrote is printed
through :func:`~lw_temporal._terminal.terminal_safe`: it never reaches the terminal as
control sequences.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from ._agent import AgentResult, Progress
from ._failures import failure_message
from ._ids import PROGRESS_QUERY
from ._privacy._codec import NoKeysGiven, PayloadSealed
from ._privacy._sealed_failures import opened_message
from ._terminal import terminal_safe

#: Seconds between two looks at a live tree.
POLL_SECONDS = 0.5
#: Seconds without any answer from the root before saying a worker may be missing.
NO_WORKER_HINT_SECONDS = 10.0
#: How long one progress query may wait for a worker.
QUERY_TIMEOUT = timedelta(seconds=5)
#: Seconds since its last poll began within which a worker still counts as polling.
POLLER_SECONDS = 90.0
#: Workflows of one tree looked at each time (a larger tree shows its first ones).
TREE_LIMIT = 200
#: Characters of an agent's latest text, and lines of a running command's output, shown.
SAID_WIDTH = 100
OUTPUT_LINES = 2
_BASH_ACTIVITY = "lw.bash"

_CLOSED_LABEL = {
    WorkflowExecutionStatus.COMPLETED: "finished",
    WorkflowExecutionStatus.FAILED: "FAILED",
    WorkflowExecutionStatus.CANCELED: "CANCELED",
    WorkflowExecutionStatus.TERMINATED: "TERMINATED",
    WorkflowExecutionStatus.TIMED_OUT: "TIMED OUT",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued as new",
}
_FAILED = {
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.CANCELED,
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
}


@dataclass(frozen=True)
class Node:
    """One workflow of a tree as the server and its ``lw.progress`` query tell it (a
    closed one that no worker answers for: as its history tells it)."""

    workflow_id: str
    depth: int
    progress: Progress | None
    status: WorkflowExecutionStatus | None
    #: Its children's workflow IDs, from ``progress`` or from its history.
    children: tuple[str, ...] = ()
    #: The newest output of the command the agent is running, if any.
    output: str = ""
    #: Why its result could not be read (a closed one whose payloads this client
    #: cannot open: it lacks the workers' keys).
    sealed: str = ""

    @property
    def failed(self) -> bool:
        return self.status in _FAILED

    def line(self) -> str:
        name = self.workflow_id if self.depth == 0 else self.workflow_id.rsplit("/", 1)[-1]
        indent = "  " * self.depth
        progress = self.progress
        if progress is None:
            label = _CLOSED_LABEL.get(self.status, "starting") if self.status else "starting"
            if self.sealed:
                label += f"  (result sealed: {self.sealed if self.depth == 0 else 'as above'})"
            return terminal_safe(f"{indent}{name}  {label}")
        what = f"{progress.role.value} {progress.definition_id or 'pipeline'}"
        status = self.status
        closed = status is not None and status is not WorkflowExecutionStatus.RUNNING
        state = (
            _CLOSED_LABEL.get(status, progress.status)
            if closed and status is not None
            else progress.status
        )
        if not closed and progress.running:
            state += f" ({', '.join(progress.running)})"
        # Live: the turn being taken; closed: how many it took.
        turns = (
            f"{progress.turn} turns"
            if closed
            else f"turn {progress.turn + 1}"
            + (f"/{progress.max_turns}" if progress.max_turns else "")
        )
        parts = [f"{indent}{name}  {what}  {state}  {turns}"]
        tokens = _tokens(progress)
        if tokens:
            parts.append(tokens)
        if progress.failed_tools:
            parts.append(f"{progress.failed_tools} failed tool calls")
        if closed and progress.summary:
            parts.append(one_line(progress.summary, 80))
        return terminal_safe("  ".join(parts))

    def details(self, *, output: bool) -> list[str]:
        """The lines under a running agent's: its latest text, its command's output."""
        progress = self.progress
        running = self.status is None or self.status is WorkflowExecutionStatus.RUNNING
        if progress is None or not running:
            return []
        indent = "  " * (self.depth + 2)
        said = one_line(progress.said, SAID_WIDTH)
        lines = [f"{indent}says: {said}"] if said else []
        if output and self.output:
            tail = [line for line in self.output.splitlines() if line.strip()]
            lines += [f"{indent}| {one_line(line, SAID_WIDTH)}" for line in tail[-OUTPUT_LINES:]]
        return lines


def one_line(text: str, limit: int) -> str:
    """``text`` on one line of at most ``limit`` characters, for a tree line or a summary
    (agent-written: escaped by :func:`terminal_safe`)."""
    flat = terminal_safe(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _tokens(progress: Progress) -> str:
    """``tokens 1200 in / 340 out (800 cached)``, once the model reports usage."""
    usage = progress.usage
    if not (usage.input_tokens or usage.output_tokens):
        return ""
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    return f"tokens {usage.input_tokens} in / {usage.output_tokens} out{cached}"


@dataclass
class _Asking:
    """Whether a worker answered this snapshot's queries: once one did not in time,
    the rest of the tree is read without asking (each would wait as long)."""

    worker: bool = True


async def _polled(client: Client, task_queue: str) -> bool:
    """Whether any worker polls ``task_queue`` for workflow tasks: without one, a query
    could only wait for its timeout. A poller counts while its last poll began within
    :data:`POLLER_SECONDS` (a long poll lasts up to a minute; the server lists pollers
    for minutes after they stopped)."""
    try:
        found = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # cannot tell: ask
    now = datetime.now(UTC)
    return any(
        not p.HasField("last_access_time")
        or (now - p.last_access_time.ToDatetime(UTC)).total_seconds() < POLLER_SECONDS
        for p in found.pollers
    )


async def _node(client: Client, workflow_id: str, depth: int, asking: _Asking) -> Node | None:
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None if depth == 0 else Node(workflow_id, depth, None, None)
        raise
    status = described.status
    if depth == 0 and not await _polled(client, described.task_queue):
        asking.worker = False
    progress: Progress | None = None
    if asking.worker:
        try:
            progress = await handle.query(
                PROGRESS_QUERY, result_type=Progress, rpc_timeout=QUERY_TIMEOUT
            )
        except RPCError:
            asking.worker = False
        except (WorkflowFailureError, WorkflowQueryFailedError, PayloadSealed):
            pass  # (sealed: this client holds no key; the tree is read from history)
    if progress is not None:
        output = await _command_output(client, described)
        return Node(workflow_id, depth, progress, status, tuple(progress.children), output)
    if status in (None, WorkflowExecutionStatus.RUNNING):
        return Node(workflow_id, depth, None, status)
    progress, children, sealed = await _from_history(client, workflow_id, status)
    return Node(workflow_id, depth, progress, status, children, sealed=sealed)


async def _from_history(
    client: Client, workflow_id: str, status: WorkflowExecutionStatus
) -> tuple[Progress | None, tuple[str, ...], str]:
    """A closed workflow no worker answers for, from its history: a finished agent's
    result (its summary, turns, tokens and children), else the children it started
    and, when its result is sealed with a key this client lacks, why."""
    sealed = ""
    if status is WorkflowExecutionStatus.COMPLETED:
        with contextlib.suppress(Exception):  # not an agent's result (a dream's...)
            try:
                agent = client.get_workflow_handle(workflow_id, result_type=AgentResult)
                result = await agent.result()
            except PayloadSealed as err:  # (a client without keys has said so already)
                sealed = "" if isinstance(err, NoKeysGiven) else str(err)
                raise
            progress = Progress(
                workflow_id=workflow_id,
                role=result.role,
                definition_id=result.definition_id,
                status="finished",
                turn=result.turns,
                max_turns=None,
                children=result.children,
                summary=result.summary,
                failed_tools=result.failed_tools,
                usage=result.usage,
                tree_usage=result.tree_usage,
            )
            return progress, tuple(result.children), ""
    children: list[str] = []
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(workflow_id)
    with contextlib.suppress(RPCError):
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                child = event.start_child_workflow_execution_initiated_event_attributes
                children.append(child.workflow_id)
                if len(children) >= TREE_LIMIT:
                    break
    return None, tuple(dict.fromkeys(children)), sealed


async def _command_output(client: Client, described: WorkflowExecutionDescription) -> str:
    """The newest output of a running ``lw.bash`` activity, from its heartbeat details."""
    for pending in described.raw_description.pending_activities:
        if pending.activity_type.name != _BASH_ACTIVITY or not pending.heartbeat_details.payloads:
            continue
        with contextlib.suppress(Exception):  # details of another version: show none
            details = await client.data_converter.decode(pending.heartbeat_details.payloads)
            latest = details[-1] if details else None
            if isinstance(latest, dict):
                return str(latest.get("stdout_tail") or latest.get("stderr_tail") or "")
    return ""


async def fetch_tree(client: Client, root: str) -> list[Node] | None:
    """The tree under ``root`` in depth-first order, or None when ``root`` does not exist."""
    nodes: list[Node] = []
    pending: list[tuple[str, int]] = [(root, 0)]
    asking = _Asking()
    while pending and len(nodes) < TREE_LIMIT:
        workflow_id, depth = pending.pop()
        node = await _node(client, workflow_id, depth, asking)
        if node is None:
            return None
        nodes.append(node)
        pending += [(child, depth + 1) for child in reversed(node.children)]
    return nodes


Printer = Callable[[str], None]


class Screen:
    """Redraws the tree in place on a terminal; prints each change once when piped.

    ``out`` prints one line (``print`` by default); ``live`` says whether it goes to a
    terminal (default: whether stdout is one)."""

    def __init__(self, out: Printer | None = None, *, live: bool | None = None) -> None:
        self.out: Printer = out or (lambda line: print(line, flush=True))
        self.live = sys.stdout.isatty() if live is None else live
        self.started = time.monotonic()
        self._drawn = 0
        self._last: dict[str, str] = {}

    def show(self, nodes: list[Node]) -> None:
        if self.live:
            if nodes:
                clear = f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""
                lines = [
                    line for node in nodes for line in (node.line(), *node.details(output=True))
                ]
                self.out(clear + "\n".join(lines))
                self._drawn = len(lines)
            return
        elapsed = time.monotonic() - self.started
        for node in nodes:
            line = "\n".join((node.line(), *node.details(output=False)))
            if self._last.get(node.workflow_id) != line:
                self._last[node.workflow_id] = line
                self.out(f"[{elapsed:6.1f}s] {line}")

    def final(self, nodes: list[Node]) -> None:
        if self.live:
            self.show(nodes)
            return
        self.out("run tree:")
        for node in nodes:
            self.out(node.line())

    def snapshot(self, nodes: list[Node]) -> None:
        """One look at the tree (``status``): each agent's line and, under a running
        one, what it last said and its command's newest output, which a snapshot has no
        later change to show instead."""
        if self.live:
            self.show(nodes)
            return
        self.out("run tree:")
        for node in nodes:
            for line in (node.line(), *node.details(output=True)):
                self.out(line)


async def report_failures(client: Client, nodes: list[Node]) -> int:
    """Name every failed workflow of the tree (deepest first) on stderr; the exit code."""
    failed = sorted((n for n in nodes if n.failed), key=lambda n: -n.depth)
    for node in failed:
        why = await failure_message(client, node.workflow_id)
        print(
            terminal_safe(f"lw-temporal: workflow {node.workflow_id} failed: {why}"),
            file=sys.stderr,
        )
    return 1 if failed else 0


async def follow(client: Client, root: str, screen: Screen, done: asyncio.Event) -> list[Node]:
    """Show the tree under ``root`` until ``done`` is set; return its last snapshot."""
    nodes: list[Node] = []
    hinted = False
    while True:
        finished = done.is_set()
        nodes = await fetch_tree(client, root) or nodes
        if finished:
            return nodes
        screen.show(nodes)
        silent = not nodes or nodes[0].progress is None
        if silent and not hinted and time.monotonic() - screen.started > NO_WORKER_HINT_SECONDS:
            hinted = True
            why = await failing_task(client, root)
            screen.out(
                terminal_safe(f"({root}'s workflow task fails on the worker: {why})")
                if why
                else f"(no answer from {root}'s {PROGRESS_QUERY} query yet: is a worker with "
                "the lw plugin polling its task queue?)"
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), POLL_SECONDS)


async def failing_task(client: Client, workflow_id: str) -> str | None:
    """Why the worker fails ``workflow_id``'s workflow task, retried until fixed (an
    input sealed with keys the workers lack: ``run --data-dir`` naming another data
    dir; a bug in workflow code), from its history; ``None`` when its last did not fail."""
    failure: str | None = None
    with contextlib.suppress(RPCError):
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                attributes = event.workflow_task_failed_event_attributes
                failure = (
                    await opened_message(attributes.failure, client.data_converter.decode)
                    or "no reason given"
                )
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                failure = None
    return failure


def new_token() -> str:
    """A fresh run token: readable time first, then randomness against collisions."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
