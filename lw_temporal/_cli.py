"""The ``lw-temporal`` command line: the demo, dreaming, scratch retention and memory
admin.

Each subcommand's work lives in the module of its concept; this module only parses
arguments and reports errors as one clear line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
from typing import Any

from ._live import add_live_commands
from ._memory._cli import add_memory_commands
from ._telemetry._worker import add_worker_options

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def build_parser() -> argparse.ArgumentParser:
    from ._cli_dream import add_dream

    parser = argparse.ArgumentParser(
        prog="lw-temporal",
        description="Durable, sandboxed working memory for AI agents on Temporal.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_demo(sub)
    _add_worker(sub)
    add_dream(sub)
    _add_gc(sub)
    add_memory_commands(sub)
    add_live_commands(sub)
    return parser


def load_object(spec: str) -> Any:
    """Import ``module:attribute`` (e.g. ``workflows.pipeline:DEFINITIONS``)."""
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
    _add_connection(worker)
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
    _add_model_options(worker)
    worker.add_argument(
        "--sandbox", default=None, help="sandbox backend: auto (default), bwrap or landlock"
    )
    worker.add_argument(
        "--search-attributes",
        action="store_true",
        help="the server has the LwRole/LwDefinition keyword search attributes",
    )
    add_worker_options(worker)

    async def handler(args: argparse.Namespace) -> int:
        from temporalio.client import Client
        from temporalio.worker import Worker

        from ._plugin import LittleWorkflowPlugin
        from ._telemetry._worker import flush_tracing, plugin_options, worker_runtime

        options: dict[str, Any] = {"search_attributes_registered": args.search_attributes}
        if args.model is not None:
            options["model"] = build_model(args.model, args.model_base_url)
        if args.sandbox is not None:
            options["sandbox"] = args.sandbox
        options.update(plugin_options(args))
        if args.host_timeout is not None:
            options["host_timeout"] = args.host_timeout
        from ._topology import TopologyMismatch

        try:
            plugin = LittleWorkflowPlugin(
                args.data_dir,
                load_object(args.definitions),
                memory_root=args.memory_root,
                runs_root=args.runs_root,
                host=args.host,
                memory_id=args.memory_id,
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

    worker.set_defaults(handler=_then_exit(handler))


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help=(
            "the model the agents use: anthropic:<model> (key from ANTHROPIC_API_KEY), "
            "openai:<model> (key from OPENAI_API_KEY), or module:attribute naming a Model "
            "or a factory returning one"
        ),
    )
    parser.add_argument(
        "--model-base-url",
        default=None,
        help="with openai:<model>: an OpenAI-compatible server (vLLM, Ollama, LiteLLM)",
    )


def build_model(spec: str, base_url: str | None = None) -> Any:
    """The Model of a ``--model`` value; exits with the variable to set when a
    provider's key is missing."""
    from .models import ModelSpecError, model_from_spec
    from .models._spec import is_provider_spec

    if not is_provider_spec(spec):
        model = load_object(spec)
        # A factory (class or function) is called; a ready Model is used as is.
        return model() if not hasattr(model, "next_turn") else model
    try:
        return model_from_spec(spec, base_url=base_url)
    except ModelSpecError as err:
        raise SystemExit(f"lw-temporal: {err}") from None
    except ImportError as err:
        provider = spec.partition(":")[0]
        raise SystemExit(
            f"lw-temporal: model {spec!r} needs the {provider} SDK: "
            f"pip install 'lw-temporal[{provider}]' ({err})"
        ) from None


def _host_line(plugin: Any, task_queue: str, memory_id: str) -> str:
    layout, host = plugin.config.layout, plugin.config.topology.host
    if layout.runs_root is None and host is None:
        return f", memory id {memory_id}"
    pinned = "" if host is None else f", host {host} (queue {task_queue}@{host})"
    return f", memory root {layout.root} (id {memory_id}), runs root {layout.local_root}{pinned}"


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="run the sample pipeline end to end on an embedded Temporal dev server",
    )
    demo.add_argument("--data-dir", required=True, help="where memory and run scratch go")
    demo.add_argument(
        "--hold",
        action="store_true",
        help="keep the dev server and its UI up after the pipeline, until Ctrl-C",
    )
    _add_model_options(demo)

    async def handler(args: argparse.Namespace) -> int:
        from ._demo import run_demo

        return await run_demo(args)

    demo.set_defaults(handler=_then_exit(handler))


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``1h30m``, ``7d``, ``2w`` (or plain seconds) as a timedelta."""
    import re

    value = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        seconds = float(value)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhdw])", value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration; write e.g. 90s, 15m, 1h30m, 7d or 2w"
            )
        seconds = sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be positive")
    return timedelta(seconds=seconds)


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", default="localhost:7233", help="Temporal frontend host:port")
    parser.add_argument("--namespace", default="default")


async def _connect(args: argparse.Namespace) -> Any:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    return await Client.connect(
        args.address, namespace=args.namespace, data_converter=pydantic_data_converter
    )


def _failed(what: str, err: Exception) -> int:
    message = str(err) or type(err).__name__
    cause = getattr(err, "cause", None) or err.__cause__
    if cause is not None and str(cause):
        message = f"{message}: {cause}"
    print(f"lw-temporal: {what} failed: {message}", file=sys.stderr)
    return 1


def _then_exit(handler: Handler) -> Handler:
    """Exit straight after a short-lived client command: the SDK's native threads can
    crash CPython's teardown of a finished process (temporalio/sdk-python#300)."""

    async def run(args: argparse.Namespace) -> int:
        code = await handler(args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    return run


def _add_gc(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gc = sub.add_parser(
        "gc", help="remove the scratch of runs closed longer than a retention period"
    )
    gc.add_argument("--data-dir", required=True, help="the data dir whose runs/ is cleaned")
    gc.add_argument(
        "--retain",
        type=parse_duration,
        default=None,
        help="keep scratch this long after its run closed (default: keep forever)",
    )
    gc.add_argument("--dry-run", action="store_true", help="only show what would be removed")
    gc.add_argument(
        "--schedule-every",
        type=parse_duration,
        default=None,
        help="instead of removing now, create a Schedule that runs retention this often",
    )
    gc.add_argument("--task-queue", default="lw", help="with --schedule-every: the workers")
    _add_connection(gc)

    async def handler(args: argparse.Namespace) -> int:
        from ._ids import DataLayout
        from ._retention import (
            RetentionPolicy,
            collect_garbage,
            default_actor,
            schedule_retention,
        )

        if args.retain is None:
            print(
                "retention is 'keep forever' (the default): nothing to remove; "
                "pass --retain 30d to remove scratch of runs closed 30 days ago"
            )
            return 0
        try:
            client = await _connect(args)
            if args.schedule_every is not None:
                handle = await schedule_retention(
                    client,
                    every=args.schedule_every,
                    retain=args.retain,
                    task_queue=args.task_queue,
                )
                print(
                    f"schedule {handle.id}: scratch retention {args.retain} every "
                    f"{args.schedule_every} on task queue {args.task_queue!r}"
                )
                return 0
            report = await collect_garbage(
                client,
                DataLayout.at(args.data_dir),
                RetentionPolicy(retain=args.retain, dry_run=args.dry_run, max_listed=10_000),
                actor=default_actor(),
            )
        except Exception as err:
            return _failed("gc", err)
        verb = "would remove" if report.dry_run else "removed"
        for item in report.removed:
            print(f"{verb} {item.path} ({item.files} files, {item.bytes} bytes; {item.why})")
        for skipped in report.skipped:
            print(f"skipped {skipped}", file=sys.stderr)
        print(
            f"{verb} {report.removed_count} scratch folders ({report.removed_bytes} bytes); "
            f"kept {report.kept_running} of running runs, {report.kept_recent} recent"
        )
        return 1 if report.skipped else 0

    gc.set_defaults(handler=_then_exit(handler))


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
