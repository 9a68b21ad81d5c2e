"""``lw-temporal run`` and ``lw-temporal status``: start a run and follow its tree,
or print one snapshot of it.

The tree itself (querying ``lw.progress``, drawing it, naming failures) is
:mod:`lw_temporal._live`, which the demo shares; this module turns the arguments into
a workflow ID and an exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from temporalio.client import Client, WorkflowFailureError

from .._ids import AgentId, InvalidWorkflowId, check_definition_id
from .._live import (
    Screen,
    failure_message,
    fetch_tree,
    follow,
    new_token,
    one_line,
    report_failures,
)
from .._privacy import KeyShredded, PayloadSealed
from .._privacy._registry import AmbiguousKeyStore
from .._workflows import AgentInput, AgentResult
from ._common import Commands, add_connection, connect, then_exit
from ._keys import add_keys


def add_run(sub: Commands) -> None:
    run = sub.add_parser(
        "run",
        help="start a run on a server and show its tree live until it ends",
        description=(
            'lw-temporal run <definition> "<task>" starts a planner run of one workflow '
            'definition; lw-temporal run --pipeline "<task>" starts an orchestrator. '
            "A worker serving the definitions must be polling --task-queue. Exits 0 when "
            "the run and every workflow it started succeeded, 1 naming each that failed."
        ),
    )
    run.add_argument("words", nargs="+", metavar="[definition] task")
    run.add_argument("--pipeline", action="store_true", help="start an orchestrator")
    add_connection(run)
    add_keys(run)
    run.add_argument("--task-queue", default="lw")
    run.add_argument("--id", default=None, help="the run token (default: time and random)")
    run.add_argument(
        "--tracing",
        action="store_true",
        help="start the run's trace here (OpenTelemetry, exported by the OTEL_* variables)",
    )
    run.set_defaults(handler=then_exit(run_command))

    status = sub.add_parser("status", help="show one snapshot of a run's tree")
    status.add_argument("workflow_id")
    add_connection(status)
    add_keys(status)
    status.set_defaults(handler=then_exit(status_command))


def agent_id_for(args: argparse.Namespace) -> tuple[AgentId, str]:
    """The workflow ID and the task of ``lw-temporal run``'s positional arguments."""
    words: list[str] = args.words
    expected = 1 if args.pipeline else 2
    if len(words) != expected:
        usage = (
            'lw-temporal run --pipeline "<task>"'
            if args.pipeline
            else 'lw-temporal run <definition> "<task>"'
        )
        raise SystemExit(f"lw-temporal run: expected {usage}, got {len(words)} arguments")
    token = args.id or new_token()
    try:
        if args.pipeline:
            return AgentId.orchestrator(token), words[0]
        return AgentId.planner(check_definition_id(words[0]), token), words[1]
    except (InvalidWorkflowId, ValueError) as err:
        raise SystemExit(f"lw-temporal run: {err}") from None


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


async def run_command(args: argparse.Namespace) -> int:
    agent_id, task = agent_id_for(args)
    workflow_id = str(agent_id)
    client = await connect(args)
    screen = Screen()
    print(f"starting {agent_id.workflow_type} {workflow_id} on task queue {args.task_queue}")
    try:
        handle = await traced(client, args).start_workflow(
            agent_id.workflow_type,
            AgentInput(task=task),
            id=workflow_id,
            task_queue=args.task_queue,
            result_type=AgentResult,
        )
    except (AmbiguousKeyStore, KeyShredded) as err:  # no key to seal the task with
        raise SystemExit(f"lw-temporal run: {err}") from None
    done = asyncio.Event()
    watcher = asyncio.create_task(follow(client, workflow_id, screen, done))
    result: AgentResult | None = None
    sealed = False
    try:
        result = await handle.result()
    except WorkflowFailureError:
        pass  # named below, with the rest of the tree's failures
    except PayloadSealed as err:
        sealed = True  # the run ended; this command holds no keys to read its result
        print(f"lw-temporal: {workflow_id} ended; its result is sealed: {err}", file=sys.stderr)
    finally:
        done.set()
    nodes = await watcher
    screen.final(nodes)
    code = await report_failures(client, nodes)
    if result is not None:
        print(f"{workflow_id} finished in {time.monotonic() - screen.started:.1f}s: ", end="")
        print(one_line(result.summary, 400))
        if result.tree_usage.model_calls:
            print(f"tokens, whole tree: {result.tree_usage.line()}")
    elif not code and not sealed:
        why = await failure_message(client, workflow_id)
        print(f"lw-temporal: workflow {workflow_id} failed: {why}", file=sys.stderr)
        code = 1
    return _ended(code)


async def status_command(args: argparse.Namespace) -> int:
    client = await connect(args)
    nodes = await fetch_tree(client, args.workflow_id)
    if nodes is None:
        print(
            f"lw-temporal status: no workflow {args.workflow_id!r} in namespace "
            f"{args.namespace} on {args.address}",
            file=sys.stderr,
        )
        return 1
    Screen(live=False).final(nodes)
    return await report_failures(client, nodes)
