"""``lw-temporal gc``: remove the scratch of runs closed longer than a retention
period, now or on a Schedule (the work is :mod:`lw_temporal.memory._retention`)."""

from __future__ import annotations

import argparse
import os

from ._common import (
    USAGE,
    CliError,
    Commands,
    add_connection,
    existing_dir,
    failed,
    operator,
    parse_duration,
    say,
    then_exit,
)
from ._connect import connect


def add_gc(sub: Commands) -> None:
    gc = sub.add_parser(
        "gc", help="remove the scratch of runs closed longer than a retention period"
    )
    gc.add_argument(
        "--data-dir", required=True, type=existing_dir, help="the data dir whose runs/ is cleaned"
    )
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
    add_connection(gc)
    gc.set_defaults(handler=then_exit(_gc))


#: Folders ``gc`` names that it could not remove; the rest are counted.
SKIPPED_SHOWN = 20


def _check_writable(data_dir: str) -> None:
    """gc removes folders: a data dir it cannot write is one line, not a line per run."""
    try:
        read_only = bool(os.statvfs(data_dir).f_flag & os.ST_RDONLY)
    except OSError as err:
        raise CliError(f"--data-dir {data_dir}: {err.strerror}", USAGE) from None
    if read_only or not os.access(data_dir, os.W_OK):
        why = "on a read-only file system" if read_only else "not writable by this user"
        raise CliError(
            f"--data-dir {data_dir} is {why}: gc removes folders there; run it where the "
            "data dir is writable (as the workers' user), or with --dry-run",
            USAGE,
        )


async def _gc(args: argparse.Namespace) -> int:
    from .._ids import DataLayout
    from ..memory._retention import RetentionPolicy, collect_garbage, schedule_retention

    if args.retain is None:
        say(
            "retention is 'keep forever' (the default): nothing to remove; "
            "pass --retain 30d to remove scratch of runs closed 30 days ago"
        )
        return 0
    if args.schedule_every is None and not args.dry_run:
        _check_writable(args.data_dir)
    try:
        client = await connect(args)
        if args.schedule_every is not None:
            handle = await schedule_retention(
                client,
                every=args.schedule_every,
                retain=args.retain,
                task_queue=args.task_queue,
            )
            say(
                f"schedule {handle.id}: scratch retention {args.retain} every "
                f"{args.schedule_every} on task queue {args.task_queue!r}"
            )
            return 0
        report = await collect_garbage(
            client,
            DataLayout.at(args.data_dir),
            RetentionPolicy(retain=args.retain, dry_run=args.dry_run, max_listed=10_000),
            actor=f"cli:{operator()}",
        )
    except Exception as err:
        return failed("gc", err)
    verb = "would remove" if report.dry_run else "removed"
    for item in (*report.removed, *report.bookkeeping_removed):
        say(f"{verb} {item.path} ({item.files} files, {item.bytes} bytes; {item.why})")
    for skipped in report.skipped[:SKIPPED_SHOWN]:
        say(f"skipped {skipped}", err=True)
    if len(report.skipped) > SKIPPED_SHOWN:
        say(f"skipped {len(report.skipped) - SKIPPED_SHOWN} more folders", err=True)
    say(
        f"{verb} {report.removed_count} scratch folders ({report.removed_bytes} bytes); "
        f"kept {report.kept_running} of running runs, {report.kept_recent} recent; "
        f"{verb} {report.bookkeeping_removed_count} conversation and dream proposal folders "
        f"of those runs ({report.bookkeeping_removed_bytes} bytes)"
    )
    return 1 if report.skipped else 0
