"""``lw-temporal run`` and ``lw-temporal status``: start a run and follow its tree,
or print one snapshot of it.

The tree itself (querying ``lw.progress``, drawing it, naming failures) is
:mod:`lw_temporal._live`, which the demo shares; this module turns the arguments into
a workflow ID and an exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from .._agent import AgentInput, AgentResult
from .._failures import failure_message
from .._ids import AgentId, InvalidWorkflowId, check_definition_id, parse_workflow_id
from .._live import (
    Node,
    Screen,
    _polled,
    fetch_tree,
    follow,
    new_token,
    one_line,
    report_failures,
)
from .._privacy import KeyShredded, PayloadSealed
from .._privacy._registry import AmbiguousKeyStore, lookup
from ._common import (
    USAGE,
    CliError,
    Commands,
    add_connection,
    parse_duration,
    say,
    then_exit,
)
from ._connect import connect
from ._keys import add_keys

#: Exit status of a run whose workflows all finished but some tool calls failed (the
#: agents were answered with the error and went on).
TOOLS_FAILED = 3
#: Exit status of a ``run`` the user stopped following with Ctrl-C (the run goes on).
INTERRUPTED = 130
#: Seconds ``run`` waits for a worker of its task queue to be seen polling.
WORKER_GRACE = 5.0


def add_run(sub: Commands) -> None:
    run = sub.add_parser(
        "run",
        help="start a run on a server and show its tree live until it ends",
        usage=(
            'lw-temporal run DEFINITION "TASK" [options]\n'
            '       lw-temporal run --pipeline "TASK" [options]'
        ),
        description=(
            'lw-temporal run DEFINITION "TASK" starts a planner run of one workflow '
            'definition; lw-temporal run --pipeline "TASK" starts an orchestrator, which '
            "plans sub-runs of the worker's definitions. A worker serving the definitions "
            "must be polling --task-queue. Exits 0 when the run and every workflow it "
            f"started succeeded without a failed tool call, {TOOLS_FAILED} when they "
            "finished but tool calls failed, 1 naming each workflow that failed. Ctrl-C "
            "stops following; the run goes on (lw-temporal cancel WORKFLOW_ID stops it)."
        ),
    )
    run.add_argument("words", nargs="+", metavar="DEFINITION TASK", help=argparse.SUPPRESS)
    run.add_argument("--pipeline", action="store_true", help="start an orchestrator")
    add_connection(run)
    add_keys(run)
    run.add_argument("--task-queue", default="lw")
    run.add_argument("--id", default=None, help="the run token (default: time and random)")
    run.add_argument(
        "--without-worker",
        action="store_true",
        help="start even when no worker polls --task-queue (the run waits for one)",
    )
    run.add_argument(
        "--untrusted",
        action="store_true",
        help="the task is untrusted input (a page, a ticket, an email): the run is tainted "
        "and its writes to shared memory wait in quarantine (lw-temporal memory quarantine)",
    )
    run.add_argument(
        "--tracing",
        action="store_true",
        help="start the run's trace here (OpenTelemetry, exported by the OTEL_* variables)",
    )
    run.set_defaults(handler=then_exit(run_command))

    status = sub.add_parser(
        "status",
        help="show one snapshot of a run's tree",
        description=(
            "The tree under WORKFLOW_ID: live agents as their worker reports them, closed "
            "ones from their histories (no worker needed). Exits as run does."
        ),
    )
    status.add_argument("workflow_id", metavar="WORKFLOW_ID")
    add_connection(status)
    add_keys(status)
    status.set_defaults(handler=then_exit(status_command))

    cancel = sub.add_parser(
        "cancel",
        help="cancel a run and everything it started",
        description=(
            "Ask WORKFLOW_ID to cancel: its children are cancelled with it and their "
            "commands killed. Waits up to --wait for it to close."
        ),
    )
    cancel.add_argument("workflow_id", metavar="WORKFLOW_ID")
    cancel.add_argument(
        "--wait",
        type=parse_duration,
        default=timedelta(seconds=30),
        help="how long to wait for it to close (default 30s)",
    )
    add_connection(cancel)
    cancel.set_defaults(handler=then_exit(cancel_command))


def agent_id_for(args: argparse.Namespace) -> tuple[AgentId, str]:
    """The workflow ID and the task of ``lw-temporal run``'s positional arguments."""
    words: list[str] = args.words
    expected = 1 if args.pipeline else 2
    if len(words) != expected:
        usage = (
            'lw-temporal run --pipeline "TASK"'
            if args.pipeline
            else 'lw-temporal run DEFINITION "TASK"'
        )
        raise CliError(f"expected {usage}, got {len(words)} arguments", USAGE)
    token = args.id or new_token()
    try:
        if args.pipeline:
            return AgentId.orchestrator(token), words[0]
        return AgentId.planner(check_definition_id(words[0]), token), words[1]
    except (InvalidWorkflowId, ValueError) as err:
        raise CliError(str(err), USAGE) from None


def traced(client: Client, args: argparse.Namespace) -> Client:
    """``client`` with Temporal's tracing interceptor when ``--tracing`` asks, so the run's
    trace starts here; only the start goes through it (each progress query would be a
    trace of its own)."""
    if not getattr(args, "tracing", False):
        return client
    from .._telemetry._tracing import default_tracer_provider, temporal_tracing

    provider = default_tracer_provider()
    if provider is None:
        return client
    config = client.config()
    config["interceptors"] = [temporal_tracing(provider)]
    return Client(**config)


def _ended(code: int) -> int:
    """The command ends with os._exit: export its spans first."""
    from .._telemetry._worker import flush_tracing

    flush_tracing()
    return code


def _tool_failures(nodes: list[Node]) -> int:
    """Name each workflow whose tool calls failed; the exit status they make."""
    failing = [n for n in nodes if n.progress is not None and n.progress.failed_tools]
    for node in failing:
        assert node.progress is not None
        say(
            f"lw-temporal: workflow {node.workflow_id}: {node.progress.failed_tools} tool "
            "calls failed (answered to its agent as errors)",
            err=True,
        )
    return TOOLS_FAILED if failing else 0


async def run_command(args: argparse.Namespace) -> int:
    agent_id, task = agent_id_for(args)
    workflow_id = str(agent_id)
    client = await connect(args)
    if not args.without_worker:
        await _check_worker(client, args)
    screen = Screen()
    try:
        handle = await traced(client, args).start_workflow(
            agent_id.workflow_type,
            AgentInput(task=task, untrusted=args.untrusted),
            id=workflow_id,
            task_queue=args.task_queue,
            result_type=AgentResult,
            # A run ID is one run: a closed run's ID is refused like a running one's.
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except (AmbiguousKeyStore, KeyShredded) as err:  # no key to seal the task with
        raise CliError(str(err)) from None
    except WorkflowAlreadyStartedError:
        raise CliError(
            f"a workflow {workflow_id} already exists: a run ID is one run; give another "
            "--id (or none for a fresh one), or see it with lw-temporal status "
            f"{workflow_id}",
            USAGE,
        ) from None
    # Once it is started: an ID that is refused was never "starting".
    say(f"starting {agent_id.workflow_type} {workflow_id} on task queue {args.task_queue}")
    done = asyncio.Event()
    interrupted = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, interrupted.set)
    watcher = asyncio.create_task(follow(client, workflow_id, screen, done))
    waiting = asyncio.create_task(handle.result())
    stop = asyncio.create_task(interrupted.wait())
    await asyncio.wait({waiting, stop}, return_when=asyncio.FIRST_COMPLETED)
    done.set()
    if not waiting.done():
        waiting.cancel()
        watcher.cancel()
        say(
            f"\nlw-temporal run: stopped following {workflow_id}; the run goes on. See it "
            f"with lw-temporal status {workflow_id}, stop it with lw-temporal cancel "
            f"{workflow_id}",
            err=True,
        )
        return _ended(INTERRUPTED)
    stop.cancel()
    result: AgentResult | None = None
    sealed = False
    try:
        result = waiting.result()
    except WorkflowFailureError:
        pass  # named below, with the rest of the tree's failures
    except PayloadSealed as err:
        sealed = True  # the run ended; this command holds no keys to read its result
        say(f"lw-temporal: {workflow_id} ended; its result is sealed: {err}", err=True)
    nodes = await watcher
    screen.final(nodes)
    code = await report_failures(client, nodes)
    if result is not None:
        say(f"{workflow_id} finished in {time.monotonic() - screen.started:.1f}s: ", end="")
        say(one_line(result.summary, 400))
        if result.tree_usage.model_calls:
            say(f"tokens, whole tree: {result.tree_usage.line()}")
    elif not code and not sealed:
        why = await failure_message(client, workflow_id)
        say(f"lw-temporal: workflow {workflow_id} failed: {why}", err=True)
        code = 1
    return _ended(code or _tool_failures(nodes))


async def _check_worker(client: Client, args: argparse.Namespace) -> None:
    """Refuse to start a run nobody would pick up (no worker, or a misspelled task
    queue), naming the queues this host's workers serve on the same server. A worker
    that has just said ``ready:`` gets :data:`WORKER_GRACE` seconds for its first poll to
    reach the server."""
    deadline = time.monotonic() + WORKER_GRACE
    while not await _polled(client, args.task_queue):
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.25)
    else:
        return
    served = sorted(
        {q for c in lookup(args.address, args.namespace) if c.live for q in c.task_queues}
    )
    known = f"; this host's workers serve {', '.join(served)}" if served else ""
    raise CliError(
        f"no worker polls task queue {args.task_queue!r} on {args.address} (namespace "
        f"{args.namespace}){known}: start one (lw-temporal worker --task-queue "
        f"{args.task_queue} ...), pass the --task-queue a worker serves, or "
        "--without-worker to start the run anyway (it waits for a worker)"
    )


async def _check_namespace(client: Client, args: argparse.Namespace) -> None:
    """A workflow not found because its namespace is not there says so."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=args.namespace)
        )
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"no namespace {args.namespace!r} on {args.address}: pass --namespace NAME "
                "(or $TEMPORAL_NAMESPACE), or create it"
            ) from None


def _workflow_id(text: str) -> str:
    """A workflow ID of lw's grammar, or a usage error saying the grammar."""
    try:
        parse_workflow_id(text)
    except InvalidWorkflowId as err:
        raise CliError(str(err), USAGE) from None
    return text


async def status_command(args: argparse.Namespace) -> int:
    _workflow_id(args.workflow_id)
    client = await connect(args)
    nodes = await fetch_tree(client, args.workflow_id)
    if nodes is None:
        await _check_namespace(client, args)
        say(
            f"lw-temporal status: no workflow {args.workflow_id!r} in namespace "
            f"{args.namespace} on {args.address}",
            err=True,
        )
        return 1
    Screen(live=False).snapshot(nodes)
    return await report_failures(client, nodes) or _tool_failures(nodes)


async def cancel_command(args: argparse.Namespace) -> int:
    _workflow_id(args.workflow_id)
    client = await connect(args)
    handle = client.get_workflow_handle(args.workflow_id)
    try:
        before = (await handle.describe()).status
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            await _check_namespace(client, args)
            raise CliError(
                f"no workflow {args.workflow_id!r} in namespace {args.namespace} on {args.address}"
            ) from None
        raise
    if before is not WorkflowExecutionStatus.RUNNING:
        say(f"{args.workflow_id} is already closed ({before.name.lower() if before else '?'})")
        return 0
    await handle.cancel()
    say(f"{args.workflow_id}: cancellation requested; its children and commands stop with it")
    deadline = time.monotonic() + args.wait.total_seconds()
    while time.monotonic() < deadline:
        status = (await handle.describe()).status
        if status is not WorkflowExecutionStatus.RUNNING:
            say(f"{args.workflow_id}: {status.name.lower() if status else 'closed'}")
            return 0
        await asyncio.sleep(0.5)
    say(
        f"{args.workflow_id} still runs after {args.wait}: the cancellation is delivered "
        "when a worker of its task queue picks it up",
        err=True,
    )
    return 1
