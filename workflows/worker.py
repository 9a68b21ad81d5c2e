"""A standalone worker for the sample pipeline: ``python -m workflows.worker``.

It serves the lw workflows and activities for the example definitions with the
scripted sample model, against any Temporal server (``--address``). Run several, kill
one mid-pipeline, and the others (or a restarted one) carry the pipeline on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from temporalio.client import Client
from temporalio.worker import Worker

from lw_temporal import LittleWorkflowPlugin, Model

from .pipeline import DEFINITIONS, sample_model


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workflows.worker", description=__doc__)
    parser.add_argument("--address", default="localhost:7233", help="Temporal frontend")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--task-queue", default="lw")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument(
        "--search-attributes",
        action="store_true",
        help="the server has the LwRole/LwDefinition keyword search attributes",
    )
    return parser


async def serve(args: argparse.Namespace, model: Model | None = None) -> None:
    """Run a worker until SIGTERM or SIGINT; print one ``ready`` line once polling."""
    plugin = LittleWorkflowPlugin(
        args.data_dir,
        DEFINITIONS,
        model=model or sample_model(),
        search_attributes_registered=args.search_attributes,
    )
    client = await Client.connect(args.address, namespace=args.namespace, plugins=[plugin])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with Worker(client, task_queue=args.task_queue):
        print(f"ready: worker on {args.address} task queue {args.task_queue}", flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    asyncio.run(serve(build_parser().parse_args(argv)))
    # Skip CPython's teardown, which the SDK's native threads can crash after a clean
    # shutdown (temporalio/sdk-python#300): the worker has already drained.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
