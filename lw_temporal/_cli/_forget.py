"""``lw-temporal forget``: erase a run tree (the work is :mod:`lw_temporal._privacy._forget`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import Commands, add_connection, failed, say, then_exit
from ._connect import connect
from ._keys import add_key_store, key_store


def add_forget(sub: Commands) -> None:
    parser = sub.add_parser(
        "forget",
        help="erase a run tree: shred its payload key, remove its scratch, conversations "
        "and dream inputs, audited",
        description=(
            "Erase the run tree WORKFLOW_ID (a top-level run: pipeline_<token>, "
            "run_<definition>@<token> or dream_<definition>@<token>): shred its payload key, "
            "so its Temporal histories cannot be decoded wherever they were copied; remove "
            "its scratch, its conversations, its run markers and its runs' share of every "
            "dream's inputs; and append one line naming what was removed and what remains "
            "to <data dir>/.lw/audit/forget.jsonl. Memory its runs wrote stays (it is "
            "named) unless --memory revert. A tree still running is refused unless "
            "--terminate."
        ),
    )
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the tree's top-level run")
    parser.add_argument("--data-dir", required=True, help="the workers' data dir (memory root)")
    parser.add_argument(
        "--runs-root", default=None, help="the runs root, when apart from --data-dir"
    )
    parser.add_argument("--by", required=True, help="who forgets (kept in the audit log)")
    parser.add_argument("--why", required=True, help="why (kept in the audit log)")
    parser.add_argument(
        "--terminate", action="store_true", help="terminate the tree's running workflows first"
    )
    parser.add_argument(
        "--memory",
        choices=("keep", "revert"),
        default="keep",
        help="keep (default): memory the tree wrote stays and is listed; revert: each file "
        "only the tree changed since its first change goes back to its version before it",
    )
    add_key_store(parser)
    add_connection(parser)
    parser.set_defaults(handler=then_exit(_forget))


def _layout(args: argparse.Namespace) -> Any:
    from .._ids import DataLayout

    data_dir = Path(args.data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"data dir {data_dir} does not exist")
    if args.runs_root is None:
        return DataLayout.at(data_dir)
    return DataLayout.split(data_dir, args.runs_root)


async def _forget(args: argparse.Namespace) -> int:
    from .._privacy._forget import ForgetRefused, forget_tree, top_level

    try:
        layout = _layout(args)
        top_level(args.workflow_id)  # a sub-run's or a malformed ID: said before connecting
    except (ValueError, ForgetRefused) as err:
        return failed("forget", err)
    try:
        client = await connect(args)
        report = await forget_tree(
            client,
            layout,
            args.workflow_id,
            by=args.by,
            why=args.why,
            keys=key_store(args, args.data_dir),
            terminate=args.terminate,
            memory=args.memory,
            progress=lambda line: say(line, err=True),
        )
    except ForgetRefused as err:
        return failed("forget", err)
    except Exception as err:
        return failed(f"forget {args.workflow_id}", err)
    for place in report.removed:
        say(f"removed  {place.line()}")
    for place in report.remaining:
        say(f"remains  {place.line()}")
    for workflow_id in report.terminated:
        say(f"terminated {workflow_id}")
    more = report.removed_count - len(report.removed)
    if more > 0:
        say(f"... and {more} more removed (all in the audit log)")
    key = (
        f"key shredded: its {report.runs_count} workflow runs in Temporal can no longer be decoded"
        if report.key_shredded
        else "its key was shredded by an earlier forget"
        if report.already_forgotten
        else "this key store held no key of it (its payloads, if any, were not sealed here)"
    )
    say(
        f"forgot {report.tree} by {report.by}: {key}; {report.removed_count} places removed, "
        f"{report.remaining_count} remain (listed above); audit: "
        f"{layout.state / 'audit' / 'forget.jsonl'}"
    )
    return 0
