"""The ``lw-temporal`` command line: the demo, dreaming and scratch retention.

Each subcommand's work lives in the module of its concept; this module only parses
arguments and reports errors as one clear line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lw-temporal",
        description="Durable, sandboxed working memory for AI agents on Temporal.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_worker(sub)
    return parser


def load_object(spec: str) -> Any:
    """Import ``module:attribute`` (e.g. ``workflows.candidate_review:DEFINITIONS``)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"lw-temporal: {spec!r} is not of the form module:attribute")
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise SystemExit(f"lw-temporal: cannot import {module_name!r}: {err}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise SystemExit(f"lw-temporal: {module_name!r} has no attribute {attribute!r}") from None


def _add_worker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = sub.add_parser("worker", help="run a Temporal worker with the lw plugin")
    worker.add_argument("--address", default="localhost:7233", help="Temporal frontend host:port")
    worker.add_argument("--namespace", default="default")
    worker.add_argument("--task-queue", default="lw")
    worker.add_argument("--data-dir", required=True, help="memory stores and run scratch")
    worker.add_argument(
        "--definitions",
        required=True,
        help="module:attribute naming a list of WorkflowDefinition objects",
    )
    worker.add_argument(
        "--model", default=None, help="module:attribute naming the Model the agents use"
    )
    worker.add_argument(
        "--sandbox", default=None, help="sandbox backend: auto (default), bwrap or landlock"
    )

    async def handler(args: argparse.Namespace) -> int:
        from temporalio.client import Client
        from temporalio.worker import Worker

        from ._plugin import LittleWorkflowPlugin

        options: dict[str, Any] = {}
        if args.model is not None:
            options["model"] = load_object(args.model)
        if args.sandbox is not None:
            options["sandbox"] = args.sandbox
        plugin = LittleWorkflowPlugin(args.data_dir, load_object(args.definitions), **options)
        client = await Client.connect(args.address, namespace=args.namespace, plugins=[plugin])
        print(
            f"lw-temporal worker: task queue {args.task_queue!r} on {args.address} "
            f"(namespace {args.namespace}), data dir {plugin.data_dir}",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with Worker(client, task_queue=args.task_queue):
            await stop.wait()
        print("lw-temporal worker: stopped", flush=True)
        return 0

    worker.set_defaults(handler=handler)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="run the sample pipeline end to end on an embedded Temporal dev server",
    )
    demo.add_argument("--data-dir", required=True, help="where memory and run scratch go")

    async def handler(args: argparse.Namespace) -> int:
        from ._demo import run_demo

        return await run_demo(args)

    demo.set_defaults(handler=handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        print("lw-temporal: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
