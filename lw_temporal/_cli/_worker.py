"""``lw-temporal worker``: a Temporal worker with the lw plugin, until SIGINT/SIGTERM.

The options map onto :class:`LittleWorkflowPlugin`'s keywords and option groups.
Everything that can be known at start is checked before the worker polls
(:mod:`._checks`: data dir, model, metrics port, server, search attributes, sandbox),
and a failure stops it with one line and exit code 2. Once it runs, SIGINT or SIGTERM
stops it within ``--stop-timeout`` (a second signal at once), and a worker whose
polling ends on its own (a fatal error inside) says why and exits 1: it never keeps a
process up that serves nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.plugin import SimplePlugin

from .._telemetry._worker import add_worker_options
from ._checks import check_data_dir, check_port_free, check_server
from ._common import (
    USAGE,
    CliError,
    Commands,
    add_connection,
    add_model_options,
    build_model,
    exit_now,
    explain,
    load_object,
    parse_duration,
    say,
)
from ._connect import connect
from ._keys import add_worker_privacy, worker_privacy

#: How long a stopping worker may take (activities are cancelled at once) before the
#: process exits anyway, unless ``--stop-timeout`` says otherwise.
STOP_TIMEOUT = timedelta(seconds=20)


def add_worker(sub: Commands) -> None:
    from .._sandbox import SANDBOX_CHOICES

    worker = sub.add_parser(
        "worker",
        help="run a Temporal worker with the lw plugin",
        description=(
            "Serve the lw workflows and activities of --definitions on --task-queue until "
            "SIGINT or SIGTERM. Everything is checked before polling; a setting that cannot "
            "work stops the worker with one line and exit status 2."
        ),
    )
    add_connection(worker)
    worker.add_argument("--task-queue", default="lw")
    worker.add_argument("--data-dir", default=None, help="memory stores and run scratch")
    worker.add_argument(
        "--create", action="store_true", help="create the data dir (or roots) when missing"
    )
    hosts = worker.add_argument_group(
        "several hosts", "memory on a shared volume, runs on each host's disk (README)"
    )
    hosts.add_argument("--memory-root", default=None, help="memory stores (default: --data-dir)")
    hosts.add_argument("--runs-root", default=None, help="run scratch (default: --data-dir)")
    hosts.add_argument(
        "--host", default=None, help="this host's name: pin the runs started here to it"
    )
    hosts.add_argument(
        "--host-timeout",
        type=parse_duration,
        default=None,
        help="how long a pinned host may be away before its runs fail (default 5m)",
    )
    hosts.add_argument(
        "--memory-id", default=None, help="refuse to start unless the memory root has this id"
    )
    worker.add_argument(
        "--definitions",
        required=True,
        help="module:attribute naming a list of WorkflowDefinition objects "
        "(e.g. workflows.pipeline:DEFINITIONS)",
    )
    add_model_options(worker)
    worker.add_argument(
        "--no-model",
        action="store_true",
        help="serve without a model: agent runs fail at their first turn; dreams use the "
        "model-free consolidator",
    )
    worker.add_argument(
        "--sandbox",
        default="auto",
        choices=SANDBOX_CHOICES,
        help="how lw.bash isolates commands (default auto: bwrap, else Landlock)",
    )
    worker.add_argument(
        "--stop-timeout",
        type=parse_duration,
        default=STOP_TIMEOUT,
        help="the longest a stop on SIGINT/SIGTERM may take before the process exits anyway "
        "(default 20s)",
    )
    worker.add_argument(
        "--search-attributes",
        action="store_true",
        help="the server has the LwRole/LwDefinition keyword search attributes (checked)",
    )
    add_worker_options(worker)
    add_worker_privacy(worker)
    worker.set_defaults(handler=_run_worker)


def _roots(args: argparse.Namespace) -> dict[str, str]:
    """The folders the options name, by option."""
    if args.data_dir is None and (args.memory_root is None or args.runs_root is None):
        raise CliError(
            "give --data-dir (memory and runs in one folder), or both --memory-root and "
            "--runs-root (memory on a shared volume, runs on this host's disk)",
            USAGE,
        )
    roots = {"--data-dir": args.data_dir, "--memory-root": args.memory_root}
    roots["--runs-root"] = args.runs_root
    return {option: root for option, root in roots.items() if root is not None}


def _plugin(args: argparse.Namespace) -> tuple[Any, str]:
    """The plugin the options describe, after the checks that need no server, and the
    memory root's id."""
    from .._plugin import LittleWorkflowPlugin
    from .._telemetry._worker import plugin_options
    from .._topology import DEFAULT_HOST_TIMEOUT, TopologyMismatch
    from ..options._groups import DeploymentOptions

    for option, root in _roots(args).items():
        check_data_dir(root, option, create=args.create)
    definitions = load_object(args.definitions)
    if not isinstance(definitions, list | tuple):
        raise CliError(
            f"--definitions {args.definitions} is a {type(definitions).__name__}, not a "
            "list of WorkflowDefinition objects",
            USAGE,
        )
    options: dict[str, Any] = {"sandbox": args.sandbox}
    if args.model is not None:
        options["model"] = build_model(args.model, args.model_base_url)
    if args.trace_commands and not args.tracing:
        # without spans there is nothing to put a command's text on, and a worker that
        # ignored the option would leave its operator believing commands are traced
        raise CliError(
            "--trace-commands puts each command's text on its lw.bash span, and spans "
            "need --tracing: add --tracing, or drop --trace-commands",
            USAGE,
        )
    options.update(plugin_options(args))
    options["privacy"] = worker_privacy(args)
    try:
        plugin = LittleWorkflowPlugin(
            args.data_dir,
            definitions,
            deployment=DeploymentOptions(
                memory_root=args.memory_root,
                runs_root=args.runs_root,
                host=args.host,
                host_timeout=(
                    DEFAULT_HOST_TIMEOUT if args.host_timeout is None else args.host_timeout
                ),
                memory_id=args.memory_id,
                search_attributes_registered=args.search_attributes,
            ),
            **options,
        )
        memory_id = plugin.config.topology.check_start()
    except (ValueError, TypeError, TopologyMismatch) as err:
        raise CliError(str(err), USAGE) from None
    except OSError as err:
        raise CliError(f"the data dir cannot be used: {explain(err)}", USAGE) from None
    if args.model is None and not args.no_model:
        raise CliError(
            "no --model: every agent of these definitions needs one. Pass --model "
            "anthropic:<model>, openai:<model> or module:attribute "
            "(--model workflows.pipeline:sample_model plays the sample pipeline without an "
            "LLM), or --no-model to serve dreams only",
            USAGE,
        )
    return plugin, memory_id


async def _ready_sandbox(plugin: Any) -> None:
    """The sandbox's self-test, now rather than at the first command."""
    from temporalio.exceptions import ApplicationError

    try:
        await plugin.bash_activities.ready_backend()
    except ApplicationError as err:
        raise CliError(err.message, USAGE) from None


async def _run_worker(args: argparse.Namespace) -> int:
    from temporalio.worker import Worker

    from .._telemetry._worker import flush_tracing, worker_runtime

    if args.metrics_port is not None:
        check_port_free(args.metrics_host, args.metrics_port)
    plugin, memory_id = _plugin(args)
    try:
        runtime = worker_runtime(args)
    except Exception as err:  # the SDK's runtime reports a bad bind as a bare exception
        raise CliError(f"cannot serve metrics: {explain(err)}", USAGE) from None
    try:
        client = await connect(args, plugins=[plugin], runtime=runtime)
    except CliError as err:
        raise CliError(str(err), USAGE) from None
    await check_server(client, args.address, search_attributes=args.search_attributes)
    await _ready_sandbox(plugin)
    polling = asyncio.Event()

    @contextlib.asynccontextmanager
    async def entered() -> AsyncIterator[None]:
        polling.set()  # inside the lw plugin's own start (sweep, sandbox): about to poll
        yield

    worker = Worker(
        client,
        task_queue=args.task_queue,
        plugins=[SimplePlugin("lw_temporal.cli.ready", run_context=entered)],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():  # a second signal: do not wait any longer
            say("lw-temporal worker: stopped at once (second signal)", err=True)
            exit_now(1, undo_sandbox=False)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    running = asyncio.create_task(worker.run())
    stopping = asyncio.create_task(stop.wait())
    started = asyncio.create_task(polling.wait())
    await asyncio.wait({running, stopping, started}, return_when=asyncio.FIRST_COMPLETED)
    if started.done() and not running.done():
        say(
            f"ready: worker on {args.address} (namespace {args.namespace}) task queue "
            f"{args.task_queue}, data dir {plugin.data_dir}"
            + _host_line(plugin, args.task_queue, memory_id)
            + _tracing_line(args)
        )
        sys.stdout.flush()
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    started.cancel()
    if running.done():
        stopping.cancel()
        failure = running.exception()
        why = explain(failure) if failure is not None else "its polling ended"
        say(f"lw-temporal worker: stopped serving: {why}", err=True)
        exit_now(1)
    code = 0
    try:
        await asyncio.wait_for(asyncio.shield(worker.shutdown()), args.stop_timeout.total_seconds())
        with contextlib.suppress(Exception):
            await asyncio.wait_for(running, 1)
    except TimeoutError:
        say(f"lw-temporal worker: did not stop within {args.stop_timeout}; exiting", err=True)
        code = 1
    with contextlib.suppress(TimeoutError):  # spans still buffered, within the bound too
        await asyncio.wait_for(asyncio.to_thread(flush_tracing), 5)
    say("lw-temporal worker: stopped")
    exit_now(code)
    return code


def _tracing_line(args: argparse.Namespace) -> str:
    if not getattr(args, "tracing", False):
        return ""
    from .._telemetry._export import describe_export

    return f", tracing ({describe_export()})"


def _host_line(plugin: Any, task_queue: str, memory_id: str) -> str:
    layout, host = plugin.config.layout, plugin.config.topology.host
    if layout.runs_root is None and host is None:
        return f", memory id {memory_id}"
    pinned = "" if host is None else f", host {host} (queue {task_queue}@{host})"
    return f", memory root {layout.root} (id {memory_id}), runs root {layout.local_root}{pinned}"
