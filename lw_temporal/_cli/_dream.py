"""``lw-temporal dream schedule|list|show|approve|reject``: dreaming from a terminal.

Every verb talks to the Temporal server only (``--address``); a dream is addressed by
its workflow ID, so several proposals for one target are reviewed independently.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from ._common import (
    Commands,
    Handler,
    add_connection,
    connect,
    failed,
    operator,
    parse_duration,
    then_exit,
)
from ._keys import add_keys


def add_dream(sub: Commands) -> None:
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
    add_connection(schedule)
    add_keys(schedule)
    schedule.set_defaults(handler=then_exit(_schedule))

    listing = verbs.add_parser("list", help="dreams waiting for review (or all with --all)")
    listing.add_argument("--all", action="store_true", help="include finished dreams")
    listing.add_argument(
        "--task-queue", default=None, help="only the dreams that run on this task queue"
    )
    add_connection(listing)
    add_keys(listing)
    listing.set_defaults(handler=then_exit(_list))

    show = verbs.add_parser(
        "show", help="a waiting dream's proposal: a unified diff per file and its source runs"
    )
    show.add_argument("workflow_id", help="the dream's workflow id (see dream list)")
    show.add_argument(
        "--max-bytes", type=int, default=256 * 1024, help="cut the diff after this many bytes"
    )
    _accept_task_queue(show)
    add_connection(show)
    add_keys(show)
    show.set_defaults(handler=then_exit(_show))

    for verb, help_text in (
        ("approve", "promote a dream's changes (all, or --only PATH...) into its target"),
        ("reject", "close a dream without touching its target"),
    ):
        decide = verbs.add_parser(verb, help=help_text)
        decide.add_argument("workflow_id", help="the dream's workflow id (see dream list)")
        decide.add_argument("--by", default=None, help="who decides (default: your user name)")
        decide.add_argument("--why", default="", help="the reason, kept in the audit log")
        if verb == "approve":
            decide.add_argument(
                "--only",
                nargs="+",
                default=(),
                metavar="PATH",
                help="promote only these files (paths in the target's memory, as dream "
                "show prints them); the rest is dropped",
            )
        _accept_task_queue(decide)
        add_connection(decide)
        add_keys(decide)
        decide.set_defaults(handler=then_exit(_decide_handler(verb)))


def _accept_task_queue(parser: argparse.ArgumentParser) -> None:
    """Scripts pass one ``--task-queue`` to every dream verb; a dream is found by its
    workflow id, so where the verb needs no queue the flag is accepted and not needed."""
    parser.add_argument(
        "--task-queue",
        default=None,
        help="accepted for symmetry with schedule/list; the workflow id finds the dream",
    )


async def _schedule(args: argparse.Namespace) -> int:
    from .._dreaming import DreamOptions, schedule_dreaming

    try:
        options = DreamOptions(
            max_runs=args.max_runs,
            batch_size=args.batch_size,
            approval_timeout=args.approval_timeout,
        )
        client = await connect(args)
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
        return failed("dream schedule", err)
    print(
        f"schedule {handle.id}: lw.Dreaming of {args.definition} every {args.every} "
        f"on task queue {args.task_queue!r}"
    )
    return 0


async def _list(args: argparse.Namespace) -> int:
    from .._dreaming import list_dreams

    try:
        client = await connect(args)
        dreams = await list_dreams(client, running_only=not args.all, task_queue=args.task_queue)
    except Exception as err:
        return failed("dream list", err)
    if not dreams:
        print("no dreams" + ("" if args.all else " running"))
    for state in dreams:
        by = "agent" if state.agent else "consolidator"
        print(
            f"{state.workflow_id}  {state.status.value}  target={state.target}  "
            f"runs={state.runs}  changes={state.changes_count}  notes-by={by}"
        )
        for change in state.changes:
            kind = "new" if change.base_sha256 is None else "changed"
            print(f"    {kind} {state.target}/{change.path} ({change.bytes} bytes)")
        if state.decision is not None:
            print(f"    decided by {state.decision.who}: {state.decision.why}")
    return 0


async def _show(args: argparse.Namespace) -> int:
    from .._dreaming import show_dream

    try:
        client = await connect(args)
        shown = await show_dream(client, args.workflow_id, max_bytes=args.max_bytes)
    except Exception as err:
        return failed("dream show", err)
    sys.stdout.write(shown.text)
    if shown.truncated:
        print(
            f"\n(diff cut at {args.max_bytes} bytes; the whole diff is {shown.path} on the worker)"
        )
    return 0


def _decide_handler(verb: str) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from .._dreaming import approve_dream, reject_dream

        who = args.by or operator()
        try:
            client = await connect(args)
            if verb == "approve":
                outcome = await approve_dream(
                    client, args.workflow_id, who, args.why, only=args.only
                )
            else:
                status = await reject_dream(client, args.workflow_id, who, args.why)
        except Exception as err:
            return failed(f"dream {verb}", err)
        if verb == "reject":
            print(f"{args.workflow_id}: {status.value} by {who}; the target is unchanged")
            return 0
        for path in outcome.promoted:
            print(f"promoted {path} (approved by {who})")
        for path in outcome.dropped:
            print(f"dropped {path} (not in --only)")
        for conflict in outcome.conflicts:
            print(f"conflict: {conflict}", file=sys.stderr)
        if outcome.conflicts and not outcome.promoted:
            print(
                f"{args.workflow_id}: nothing promoted; the dream still waits for a decision",
                file=sys.stderr,
            )
        return 1 if outcome.conflicts else 0

    return handler
