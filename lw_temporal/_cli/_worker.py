"""``lw-temporal worker``: a Temporal worker with the lw plugin, until SIGINT/SIGTERM.

The options map onto :class:`LittleWorkflowPlugin`'s keywords and option groups; a bad data dir,
definition list or host setting stops the worker before it polls, with exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from .._telemetry._worker import add_worker_options
from ._common import (
    Commands,
    add_connection,
    add_model_options,
    build_model,
    load_object,
    parse_duration,
    then_exit,
)
from ._keys import add_worker_privacy, worker_privacy


def add_worker(sub: Commands) -> None:
    worker = sub.add_parser("worker", help="run a Temporal worker with the lw plugin")
    add_connection(worker)
    worker.add_argument("--task-queue", default="lw")
    worker.add_argument("--data-dir", default=None, help="memory stores and run scratch")
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
        help="module:attribute naming a list of WorkflowDefinition objects",
    )
    add_model_options(worker)
    worker.add_argument(
        "--sandbox", default=None, help="sandbox backend: auto (default), bwrap or landlock"
    )
    worker.add_argument(
        "--search-attributes",
        action="store_true",
        help="the server has the LwRole/LwDefinition keyword search attributes",
    )
    add_worker_options(worker)
    add_worker_privacy(worker)
    worker.set_defaults(handler=then_exit(_run_worker))


async def _run_worker(args: argparse.Namespace) -> int:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from .._options import DeploymentOptions
    from .._plugin import LittleWorkflowPlugin
    from .._telemetry._worker import flush_tracing, plugin_options, worker_runtime
    from .._topology import DEFAULT_HOST_TIMEOUT, TopologyMismatch

    options: dict[str, Any] = {}
    if args.model is not None:
        options["model"] = build_model(args.model, args.model_base_url)
    if args.sandbox is not None:
        options["sandbox"] = args.sandbox
    options.update(plugin_options(args))
    options["privacy"] = worker_privacy(args)
    try:
        plugin = LittleWorkflowPlugin(
            args.data_dir,
            load_object(args.definitions),
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
    except (ValueError, TopologyMismatch) as err:
        print(f"lw-temporal worker: {err}", file=sys.stderr, flush=True)
        return 2
    client = await Client.connect(
        args.address, namespace=args.namespace, plugins=[plugin], runtime=worker_runtime(args)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with Worker(client, task_queue=args.task_queue):
        print(
            f"ready: worker on {args.address} (namespace {args.namespace}) task queue "
            f"{args.task_queue}, data dir {plugin.data_dir}"
            + _host_line(plugin, args.task_queue, memory_id),
            flush=True,
        )
        await stop.wait()
    flush_tracing()
    print("lw-temporal worker: stopped", flush=True)
    return 0


def _host_line(plugin: Any, task_queue: str, memory_id: str) -> str:
    layout, host = plugin.config.layout, plugin.config.topology.host
    if layout.runs_root is None and host is None:
        return f", memory id {memory_id}"
    pinned = "" if host is None else f", host {host} (queue {task_queue}@{host})"
    return f", memory root {layout.root} (id {memory_id}), runs root {layout.local_root}{pinned}"
