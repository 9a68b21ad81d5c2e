"""``lw-temporal memory quarantine``: what tainted runs hold, and a person's decision.

No server is needed: the held changes, the stores and the decision log are on the data
dir (the work is ``MemoryStores.quarantined``, ``show_quarantined``,
``release_quarantined`` and ``reject_quarantined``). Agent-written text (paths, the
diff) is printed through ``say``, escaped, so it cannot drive the terminal.
"""

from __future__ import annotations

import argparse
from typing import Any

from temporalio.exceptions import ApplicationError

from .._ids import parse_workflow_id
from ..memory._quarantine import QuarantineOutcome
from ..memory._stores import MemoryStores
from ._common import CliError, failed, say
from ._datadir import Refused, data_dir_config

_HELP = """\
A tainted run (one that read untrusted input: a network response, an untrusted attach
or path, a version another tainted run wrote, a task marked untrusted) does not change
shared memory: its writes to workflow, pipeline and org stores are held here until a
person releases or rejects them. list prints one line per run and store holding
changes; show prints them as a diff against each store as it is now; release applies
them as one compare-and-set commit per store against what the run saw (a conflict is
named and nothing of that store is applied); reject drops them. Both are audited with
--by (in each store's audit log for a release, and in .lw/audit/quarantine.jsonl).
"""


def add_quarantine(verbs: Any) -> None:
    """Add ``quarantine`` and its verbs to ``lw-temporal memory``."""
    parser = verbs.add_parser(
        "quarantine",
        help="list, show, release or reject what tainted runs hold (no server)",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="quarantine_command", required=True)
    for name, text, body in (
        ("list", "one line per run and store holding changes (the run's workflow ID first)",
         _list),
        ("show", "a run's held changes as a diff against each store as it is now", _show),
        ("release", "apply a run's held changes (compare-and-set, audited with --by)", _release),
        ("reject", "drop a run's held changes (audited with --by)", _reject),
    ):  # fmt: skip
        verb = sub.add_parser(
            name, help=text, description=f"{text}.\n\n{_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        verb.add_argument("--data-dir", required=True, help="the workers' data dir")
        verb.add_argument(
            "workflow_id", metavar="WORKFLOW_ID", nargs="?" if name == "list" else None,
            help="the tainted run's workflow ID" + (" (only its lines)" if name == "list" else ""),
        )  # fmt: skip
        if name in ("release", "reject"):
            verb.add_argument("--by", required=True, help="who decides (kept in the audit)")
            verb.add_argument("--why", default="", help="why (kept in the audit)")
            verb.add_argument("--store", default=None, help="only this store's changes "
                              "(as list prints it, e.g. workflow:research)")  # fmt: skip
        if name == "release":
            verb.add_argument(
                "--definitions", default=None,
                help="module:attribute of the worker's definitions, so a workflow store is "
                "checked against its definition's quota",
            )  # fmt: skip
        verb.set_defaults(handler=_handler(name, body))


def _handler(name: str, body: Any) -> Any:
    async def handler(args: argparse.Namespace) -> int:
        try:
            return int(body(_stores(args), args))
        except ApplicationError as err:
            return failed(f"memory quarantine {name}", ValueError(err.message))
        except (CliError, ValueError, LookupError, OSError) as err:
            return failed(f"memory quarantine {name}", err)

    return handler


def _stores(args: argparse.Namespace) -> MemoryStores:
    if args.workflow_id is not None:
        try:
            parse_workflow_id(args.workflow_id)
        except ValueError as err:
            raise ValueError(f"WORKFLOW_ID {args.workflow_id!r}: {err}") from None
    try:
        config = data_dir_config(args.data_dir, getattr(args, "definitions", None))
    except Refused as err:
        raise ValueError(str(err)) from None
    return MemoryStores.for_config(config)


def _list(stores: MemoryStores, args: argparse.Namespace) -> int:
    runs = stores.quarantined(args.workflow_id)
    if not runs:
        what = f"{args.workflow_id} holds" if args.workflow_id else "no run holds"
        say(f"{what} no changes in quarantine" if args.workflow_id else f"{what} changes")
        return 0
    for run in runs:
        moved = sum(1 for f in run.files if f.moved)
        note = f"  {moved} moved in the store since" if moved else ""
        say(
            f"{run.workflow_id}  {_label(run.store)}  {run.count} path(s), {run.bytes} "
            f"bytes  held since {run.created[:19]}Z{note}  ({run.taint})"
        )
    return 0


def _show(stores: MemoryStores, args: argparse.Namespace) -> int:
    text = stores.show_quarantined(args.workflow_id)
    if not text:
        raise ValueError(f"{args.workflow_id} holds no changes in quarantine")
    say(text, end="")
    return 0


def _outcome(stores: MemoryStores, outcome: QuarantineOutcome, verb: str) -> int:
    if not outcome.stores:
        raise ValueError(f"{outcome.workflow_id} holds no changes in quarantine")
    code = 0
    for store in outcome.stores:
        label = _label(store.store)
        if store.applied:
            say(f"{verb} {store.count} path(s) of {outcome.workflow_id} in {label} by {outcome.by}")
            continue
        code = 1
        say(
            f"not released: {label}: the store changed since {outcome.workflow_id} saw it; "
            "nothing of it was applied"
        )
        for conflict in store.conflicts:
            say(f"  conflict  {conflict}")
    return code


def _release(stores: MemoryStores, args: argparse.Namespace) -> int:
    outcome = stores.release_quarantined(
        args.workflow_id, by=args.by, why=args.why, store=_store(stores, args.store)
    )
    return _outcome(stores, outcome, "released")


def _reject(stores: MemoryStores, args: argparse.Namespace) -> int:
    outcome = stores.reject_quarantined(
        args.workflow_id, by=args.by, why=args.why, store=_store(stores, args.store)
    )
    return _outcome(stores, outcome, "rejected")


def _label(store: str) -> str:
    """A store as an operator spells it (``org``, not ``org:org``)."""
    return "org" if store == "org:org" else store


def _store(stores: MemoryStores, given: str | None) -> str | None:
    return None if given is None else str(stores.find_store(given))
