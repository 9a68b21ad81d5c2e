"""The ``lw-temporal`` command line: the demo, dreaming, scratch retention and memory
admin.

Each subcommand's work lives in the module of its concept; this module only parses
arguments and reports errors as one clear line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import timedelta
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
    _add_dream(sub)
    _add_gc(sub)
    _add_memory(sub)
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
    worker.add_argument("--data-dir", required=True, help="memory stores and run scratch")
    worker.add_argument(
        "--definitions",
        required=True,
        help="module:attribute naming a list of WorkflowDefinition objects",
    )
    worker.add_argument(
        "--model",
        default=None,
        help="module:attribute naming the Model the agents use, or a factory returning one",
    )
    worker.add_argument(
        "--sandbox", default=None, help="sandbox backend: auto (default), bwrap or landlock"
    )
    worker.add_argument(
        "--search-attributes",
        action="store_true",
        help="the server has the LwRole/LwDefinition keyword search attributes",
    )

    async def handler(args: argparse.Namespace) -> int:
        from temporalio.client import Client
        from temporalio.worker import Worker

        from ._plugin import LittleWorkflowPlugin

        options: dict[str, Any] = {"search_attributes_registered": args.search_attributes}
        if args.model is not None:
            model = load_object(args.model)
            # A factory (class or function) is called; a ready Model is used as is.
            options["model"] = model() if not hasattr(model, "next_turn") else model
        if args.sandbox is not None:
            options["sandbox"] = args.sandbox
        plugin = LittleWorkflowPlugin(args.data_dir, load_object(args.definitions), **options)
        client = await Client.connect(args.address, namespace=args.namespace, plugins=[plugin])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with Worker(client, task_queue=args.task_queue):
            print(
                f"ready: worker on {args.address} (namespace {args.namespace}) task queue "
                f"{args.task_queue}, data dir {plugin.data_dir}",
                flush=True,
            )
            await stop.wait()
        print("lw-temporal worker: stopped", flush=True)
        return 0

    worker.set_defaults(handler=_then_exit(handler))


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


def _add_dream(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dream = sub.add_parser("dream", help="schedule, list and review dreaming (lw.Dreaming)")
    verbs = dream.add_subparsers(dest="dream_command", required=True)

    schedule = verbs.add_parser(
        "schedule", help="create a Temporal Schedule that dreams of a definition"
    )
    schedule.add_argument("definition", help="the workflow definition id to consolidate")
    schedule.add_argument("--every", required=True, type=parse_duration, help="e.g. 6h, 1d")
    schedule.add_argument("--task-queue", default="lw")
    schedule.add_argument(
        "--approval-timeout",
        type=parse_duration,
        default=timedelta(days=7),
        help="how long a dream waits for approve/reject (default 7d)",
    )
    schedule.add_argument("--max-runs", type=int, default=500)
    schedule.add_argument("--batch-size", type=int, default=50)
    schedule.add_argument("--schedule-id", default=None)
    schedule.add_argument("--now", action="store_true", help="also start one dream immediately")
    _add_connection(schedule)

    async def do_schedule(args: argparse.Namespace) -> int:
        from ._dreaming import DreamOptions, schedule_dreaming

        try:
            options = DreamOptions(
                max_runs=args.max_runs,
                batch_size=args.batch_size,
                approval_timeout=args.approval_timeout,
            )
            client = await _connect(args)
            handle = await schedule_dreaming(
                client,
                args.definition,
                every=args.every,
                task_queue=args.task_queue,
                options=options,
                schedule_id=args.schedule_id,
                trigger_immediately=args.now,
            )
        except Exception as err:
            return _failed("dream schedule", err)
        print(
            f"schedule {handle.id}: lw.Dreaming of {args.definition} every {args.every} "
            f"on task queue {args.task_queue!r} (overlap: skip)"
        )
        return 0

    schedule.set_defaults(handler=_then_exit(do_schedule))

    listing = verbs.add_parser("list", help="dreams waiting for review (or all with --all)")
    listing.add_argument("--all", action="store_true", help="include finished dreams")
    _add_connection(listing)

    async def do_list(args: argparse.Namespace) -> int:
        from ._dreaming import list_dreams

        try:
            client = await _connect(args)
            dreams = await list_dreams(client, running_only=not args.all)
        except Exception as err:
            return _failed("dream list", err)
        if not dreams:
            print("no dreams" + ("" if args.all else " running"))
        for state in dreams:
            print(
                f"{state.workflow_id}  {state.status.value}  target={state.target}  "
                f"runs={state.runs}"
            )
            for note in state.notes:
                print(
                    f"    note memory/workflows/memory.dreaming/{note.path} -> "
                    f"{state.target}/{note.target_path} ({note.bytes} bytes)"
                )
            if state.decision is not None:
                print(f"    decided by {state.decision.who}: {state.decision.why}")
        return 0

    listing.set_defaults(handler=_then_exit(do_list))

    for verb, help_text in (
        ("approve", "promote a dream's notes into its target's memory"),
        ("reject", "close a dream without touching its target"),
    ):
        decide = verbs.add_parser(verb, help=help_text)
        decide.add_argument("workflow_id", help="the dream's workflow id (see dream list)")
        decide.add_argument("--by", default=None, help="who decides (default: your user name)")
        decide.add_argument("--why", default="", help="the reason, kept in the audit log")
        _add_connection(decide)
        decide.set_defaults(handler=_then_exit(_decide_handler(verb)))


def _decide_handler(verb: str) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from ._dreaming import approve_dream, reject_dream
        from ._retention import default_actor

        who = args.by or default_actor().removeprefix("cli:")
        try:
            client = await _connect(args)
            if verb == "approve":
                outcome = await approve_dream(client, args.workflow_id, who, args.why)
            else:
                status = await reject_dream(client, args.workflow_id, who, args.why)
        except Exception as err:
            return _failed(f"dream {verb}", err)
        if verb == "reject":
            print(f"{args.workflow_id}: {status.value} by {who}; the target is unchanged")
            return 0
        for path in outcome.promoted:
            print(f"promoted {path} (approved by {who})")
        for conflict in outcome.conflicts:
            print(f"conflict: {conflict}", file=sys.stderr)
        return 1 if outcome.conflicts else 0

    return handler


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


_STORE_FORMS = "workflow:<definition id>, pipeline:<pipeline key> or org"

_MEMORY_HELP = """\
Inspect and repair the memory stores of a data dir directly: no Temporal server is
needed. STORE is workflow:<definition id>, pipeline:<pipeline key> (the 64 hex digits of
memory/pipelines/<key>/, or a unique prefix of them) or org; PATH is relative to the
store root (lessons.md, not /mnt/memory/workflow/lessons.md). restore and redact take the
store's lock like a worker does, so they are safe while workers run, and they either
apply whole (a new version and an audit line naming --by) or change nothing. restore
checks the store's quota like a write (see --definitions); redact is not quota-checked.
"""

_QUOTA_HELP = (
    "module:attribute naming the worker's list of WorkflowDefinition objects, so a "
    "workflow store keeps its definition's quota; without it every store is checked "
    "against the default MemoryQuota (64 MiB, 10000 files, 4 MiB per file)"
)


class _MemoryRefused(Exception):
    """A memory admin command that cannot run as asked (nothing was changed)."""


def _add_memory(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser(
        "memory",
        help="audit, versions, restore and redact memory stores on a data dir (no server)",
        description=_MEMORY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = memory.add_subparsers(dest="memory_command", required=True)

    def verb(name: str, help_text: str, *, path: bool = True) -> argparse.ArgumentParser:
        parser = verbs.add_parser(
            name,
            help=help_text,
            description=f"{help_text}.\n\n{_MEMORY_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.add_argument("--data-dir", required=True, help="the workers' data dir")
        parser.add_argument("store", metavar="STORE", help=_STORE_FORMS)
        if path:
            parser.add_argument("path", metavar="PATH", help="a file, relative to the store root")
        return parser

    audit = verb(
        "audit", "print a store's audit log, oldest first, one line per change", path=False
    )
    audit.add_argument("--path", default=None, help="only the entries of this file")
    audit.add_argument("--limit", type=_positive_int, default=None, help="only the last N entries")
    audit.set_defaults(handler=_memory_handler("audit", _memory_audit))

    versions = verb("versions", "list the kept versions of a file, oldest first")
    versions.set_defaults(handler=_memory_handler("versions", _memory_versions))

    restore = verb("restore", "make a kept version of a file its current content again")
    restore.add_argument(
        "sha256", metavar="SHA256", help="the version (see versions; a unique prefix will do)"
    )
    restore.add_argument("--by", required=True, help="who restores (kept in the audit log)")
    restore.add_argument("--definitions", default=None, help=_QUOTA_HELP)
    restore.set_defaults(handler=_memory_handler("restore", _memory_restore))

    redact = verb("redact", "remove text from a file and from every kept version of it")
    redact.add_argument(
        "pattern", metavar="PATTERN", help="the text to remove (replaced by [REDACTED])"
    )
    redact.add_argument("--regex", action="store_true", help="PATTERN is a Python regex")
    redact.add_argument("--by", required=True, help="who redacts (kept in the audit log)")
    redact.set_defaults(handler=_memory_handler("redact", _memory_redact))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _memory_handler(verb: str, body: Callable[[argparse.Namespace], int]) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from temporalio.exceptions import ApplicationError

        try:
            return body(args)
        except ApplicationError as err:
            return _failed(f"memory {verb}", _MemoryRefused(err.message))
        except (_MemoryRefused, ValueError, OSError) as err:
            return _failed(f"memory {verb}", err)

    return handler


def _memory_stores(args: argparse.Namespace) -> tuple[Any, Any]:
    """The data dir's ``MemoryStores`` and the ``StoreRef`` STORE names (which must exist)."""
    from pathlib import Path

    from ._config import LwConfig
    from ._ids import check_definition_id
    from ._memory import MemoryStores
    from ._scope import StoreKind, StoreRef

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        raise _MemoryRefused(f"data dir {data_dir} does not exist")
    spec = getattr(args, "definitions", None)
    try:
        config = LwConfig.create(data_dir, [] if spec is None else load_object(spec))
    except (TypeError, ValueError) as err:
        raise _MemoryRefused(f"--definitions {spec}: {err}") from None
    stores = MemoryStores.for_config(config)
    layout = stores.layout

    def known(kind: StoreKind) -> list[str]:
        folders = (
            layout.memory / ("workflows" if kind is StoreKind.WORKFLOW else "pipelines"),
            layout.state / "stores" / kind.value,
        )
        return sorted({p.name for f in folders if f.is_dir() for p in f.iterdir() if p.is_dir()})

    kind_text, sep, key = args.store.partition(":")
    if kind_text == "org" and key in ("", "org"):
        store = StoreRef(StoreKind.ORG, "org")
    elif kind_text == "workflow" and sep and key:
        try:
            store = StoreRef(StoreKind.WORKFLOW, check_definition_id(key))
        except ValueError as err:
            raise _MemoryRefused(f"STORE {args.store!r}: {err}") from None
    elif kind_text == "pipeline" and sep and key:
        if not re.fullmatch(r"[0-9a-f]{1,64}", key):
            raise _MemoryRefused(
                f"STORE {args.store!r}: a pipeline key is lowercase hex (sha256), "
                "as in memory/pipelines/<key>/"
            )
        matches = [k for k in known(StoreKind.PIPELINE) if k.startswith(key)]
        if len(key) < 64 and len(matches) > 1:
            raise _MemoryRefused(
                f"STORE {args.store!r} matches {len(matches)} pipeline stores "
                f"({', '.join(m[:16] for m in matches)}); give more of the key"
            )
        store = StoreRef(StoreKind.PIPELINE, matches[0] if len(matches) == 1 else key)
    else:
        raise _MemoryRefused(f"STORE {args.store!r} is not a memory store; write {_STORE_FORMS}")
    if not stores.root(store).is_dir() and not stores.state_dir(store).is_dir():
        names = known(store.kind) if store.kind is not StoreKind.ORG else []
        listed = f" (known {store.kind.value} stores: {', '.join(names)})" if names else ""
        raise _MemoryRefused(f"no store {_label(store)} in data dir {data_dir}{listed}")
    return stores, store


def _label(store: Any) -> str:
    """STORE as the command line spells it (``org``, not ``org:org``)."""
    return "org" if store.kind.value == "org" else str(store)


def _store_path(store: Any, path: str) -> tuple[str, str]:
    """PATH relative to the store root, cleaned like the store does (no '..', not
    absolute), and how messages show it (``STORE:PATH``)."""
    from ._memory import _fs

    parts = _fs.clean_relative(path, f"{_label(store)}:{path}")
    if not parts:
        raise _MemoryRefused(f"{_label(store)}:{path} is the store root; name a file in it")
    rel = "/".join(parts)
    return rel, f"{_label(store)}:{rel}"


def _who(entry: Any) -> str:
    """Who made a change: the workflow, activity and attempt, or the admin actor."""
    if entry.workflow_id is None:
        return f"admin {entry.actor}"
    who = f"workflow {entry.workflow_id}"
    if getattr(entry, "activity_type", None) or getattr(entry, "activity_id", None):
        who += f" activity {entry.activity_type or entry.activity_id}"
    if getattr(entry, "attempt", None) is not None:
        who += f" attempt {entry.attempt}"
    return who + (f" (approved by {entry.actor})" if entry.actor else "")


def _short_time(iso: str) -> str:
    return iso[:19] + "Z" if iso.endswith("+00:00") else iso


def _memory_audit(args: argparse.Namespace) -> int:
    stores, store = _memory_stores(args)
    rel, where = (None, "") if args.path is None else _store_path(store, args.path)
    entries = stores.audit(store, path=rel)
    if rel is not None and not entries:
        raise _MemoryRefused(f"{where} has no audit entries (never written to this store)")
    if not entries:
        print(f"{_label(store)}: no audit entries")
    for entry in entries if args.limit is None else entries[-args.limit :]:
        after = entry.sha256_after[:12] if entry.sha256_after else "-"
        print(
            f"{_short_time(entry.time)}  {entry.op:<7}  {entry.path}  {entry.bytes} bytes  "
            f"sha256 {after}  by {_who(entry)}"
        )
    return 0


def _memory_versions(args: argparse.Namespace) -> int:
    stores, store = _memory_stores(args)
    rel, where = _store_path(store, args.path)
    versions = stores.versions(store, rel)
    if not versions:
        raise _MemoryRefused(f"{where} has no kept versions (never written to this store)")
    current = stores.read(store, rel, shown=where).content_sha256
    for version in versions:
        notes = "  (current)" if version.sha256 == current else ""
        notes += "" if version.available else "  (content pruned; cannot restore)"
        print(
            f"{version.sha256}  {version.bytes} bytes  {_short_time(version.time)}  "
            f"{version.op} by {_who(version)}{notes}"
        )
    return 0


def _memory_restore(args: argparse.Namespace) -> int:
    from ._memory import Provenance

    stores, store = _memory_stores(args)
    rel, where = _store_path(store, args.path)
    provenance = Provenance.admin(args.by)
    wanted = args.sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{7,64}", wanted):
        raise _MemoryRefused(
            f"SHA256 {args.sha256!r} is not a sha256: give the 64 hex digits shown by "
            "'memory versions' (or a unique prefix of at least 7)"
        )
    known: dict[str, None] = {v.sha256: None for v in stores.versions(store, rel)}
    if not known:
        raise _MemoryRefused(f"{where} has no kept versions (never written to this store)")
    for entry in stores.audit(store, path=rel):  # addresses from before a redaction resolve too
        known.update({s: None for s in (entry.sha256_before, entry.sha256_after) if s})
    matches = [sha for sha in known if sha.startswith(wanted)]
    if len(matches) != 1:
        problem = "is not a kept version of" if not matches else "matches several versions of"
        raise _MemoryRefused(f"{args.sha256} {problem} {where}; see 'lw-temporal memory versions'")
    if stores.blob(store, matches[0]) is None:
        raise _MemoryRefused(f"version {matches[0]} of {where} is no longer kept (pruned)")
    result = stores.restore(store, rel, matches[0], provenance=provenance, shown=where)
    before = result.previous_sha256[:12] if result.previous_sha256 else "absent"
    print(
        f"restored {where} to {result.content_sha256} ({result.bytes} bytes; was {before}) "
        f"by {args.by}"
    )
    return 0


def _memory_redact(args: argparse.Namespace) -> int:
    from ._memory import Provenance

    stores, store = _memory_stores(args)
    rel, where = _store_path(store, args.path)
    provenance = Provenance.admin(args.by)
    pattern = args.pattern.encode() if args.regex else re.escape(args.pattern.encode())
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise _MemoryRefused(f"PATTERN {args.pattern!r} is not a valid regex: {err}") from None
    if compiled.search(b"") is not None:
        raise _MemoryRefused(
            f"PATTERN {args.pattern!r} matches empty text; give the text to remove"
        )
    if not stores.read(store, rel, shown=where).exists and not stores.versions(store, rel):
        raise _MemoryRefused(f"{where} does not exist and has no kept versions")
    result = stores.redact(store, rel, args.pattern, regex=args.regex, provenance=provenance)
    if not result.versions_redacted:
        print(f"{where}: PATTERN not found in the file or its kept versions; nothing changed")
        return 0
    rewritten = len(result.versions_redacted) - (1 if result.current_changed else 0)
    current = (
        f"the file is now {result.content_sha256}"
        if result.current_changed
        else "the current file did not contain it"
    )
    print(f"redacted {where} by {args.by}: {current}; {rewritten} earlier version(s) rewritten")
    return 0


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
