"""``lw-temporal approvals list|approve|deny``: the tool calls waiting for a person.

``list`` prints one line per pending request (workflow ID, request id, then the tool,
the agent, how long it has waited, when it times out and the call); ``approve`` and
``deny`` send the decision, which the workflow refuses (one line, exit 1) when the
request is unknown or already decided, or the decider is not one the rule accepts.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from .._approvals import ApprovalRecord, ApprovalRequest
from .._live import one_line
from ._common import Commands, Handler, add_connection, failed, say, then_exit
from ._connect import connect
from ._keys import add_keys


def add_approvals(sub: Commands) -> None:
    approvals = sub.add_parser(
        "approvals", help="tool calls waiting for a person: list, approve, deny"
    )
    verbs = approvals.add_subparsers(dest="approvals_command", required=True)

    listing = verbs.add_parser(
        "list",
        help="pending requests of the running lw workflows, one line each: workflow ID, "
        "request id, tool, agent, age, timeout, call (and with --data-dir a tainted "
        "run's taint)",
    )
    listing.add_argument("--workflow", default=None, help="only this workflow and its tree")
    listing.add_argument("--task-queue", default=None, help="only workflows on this task queue")
    listing.add_argument(
        "--all",
        action="store_true",
        help="also the decisions (who, why): those the running workflows keep, and with "
        "--data-dir every recorded one, finished runs' too",
    )
    add_connection(listing)
    add_keys(listing)
    listing.set_defaults(handler=then_exit(_list))

    for verb, help_text in (
        ("approve", "run a pending call as the agent asked"),
        ("deny", "refuse a pending call; the agent reads --why as the call's result"),
    ):
        decide = verbs.add_parser(verb, help=help_text)
        decide.add_argument("workflow_id", metavar="WORKFLOW_ID")
        decide.add_argument(
            "request_id", metavar="REQUEST_ID", help="e.g. a1-3f9c2e (see approvals list)"
        )
        decide.add_argument("--by", required=True, help="who decides (kept in the run's audit)")
        decide.add_argument(
            "--why", required=verb == "deny", default="", help="the reason, kept with the decision"
        )
        decide.add_argument("--task-queue", default=None, help="accepted; the ID finds the run")
        add_connection(decide)
        add_keys(decide)
        decide.set_defaults(handler=then_exit(_decide_handler(verb == "approve")))


def _safe(text: str, limit: int = 200) -> str:
    """Agent-written text on one line (``say`` escapes what a terminal would act on)."""
    return one_line(text, limit)


def _age(since: datetime) -> str:
    seconds = max(int((datetime.now(UTC) - since).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _when(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


def _agent(request: ApprovalRequest) -> str:
    return f"{request.role.value} {request.definition_id or 'pipeline'}"


def pending_line(request: ApprovalRequest, taint: str | None = None) -> str:
    """``taint``: the run's taint line (``approvals list --data-dir``), when tainted."""
    return (
        f"{request.workflow_id}  {request.id}  {request.tool}  {_agent(request)}  "
        f"waiting {_age(request.requested_at)}  {request.on_timeout} at "
        f"{_when(request.deadline)}  {_safe(request.summary())}"
        + ("  (arguments cut)" if request.arguments_cut else "")
        + (f"  ({_safe(taint, 200)})" if taint else "")
    )


def _taints(args: argparse.Namespace, requests: list[ApprovalRequest]) -> dict[str, str]:
    """With --data-dir, the taint line of each tainted run among ``requests``."""
    if not args.data_dir:
        return {}
    from .._ids import DataLayout
    from .._taint import TaintBook

    book = TaintBook(DataLayout.at(Path(args.data_dir)))
    found = {}
    for request in requests:
        record = book.status(request.workflow_id, materialize=False)
        if record is not None:
            found[request.workflow_id] = record.line()
    return found


def decided_line(record: ApprovalRecord) -> str:
    request = record.request
    why = f": {_safe(record.why, 120)}" if record.why else ""
    return (
        f"{request.workflow_id}  {request.id}  {request.tool}  {_agent(request)}  "
        f"{record.outcome.value} by {_safe(record.by, 80)} at {_when(record.decided_at)}{why}  "
        f"{_safe(request.summary())}"
    )


async def _list(args: argparse.Namespace) -> int:
    from .._approvals._client import list_approvals

    try:
        client = await connect(args)
        listing = await list_approvals(
            client, workflow_id=args.workflow, task_queue=args.task_queue
        )
        decided = _recorded(args, listing.decided) if args.all else []
    except Exception as err:
        return failed("approvals list", err)
    taints = _taints(args, listing.pending)
    for request in listing.pending:
        say(pending_line(request, taints.get(request.workflow_id)))
    for record in decided:
        say(decided_line(record))
    if not listing.pending:
        say(f"no approval requests waiting ({listing.asked} running lw workflows asked)", err=True)
    if listing.more:
        say(
            "lw-temporal: more running workflows than one listing asks; narrow it with "
            "--workflow or --task-queue",
            err=True,
        )
    if listing.unreachable:
        shown = ", ".join(listing.unreachable[:10])
        say(
            f"lw-temporal: {len(listing.unreachable)} workflows did not answer (is a worker "
            f"polling their task queue?): {shown}",
            err=True,
        )
    return 0


def _recorded(args: argparse.Namespace, live: list[ApprovalRecord]) -> list[ApprovalRecord]:
    """The running workflows' decisions, and with --data-dir every recorded one."""
    found = {(r.request.workflow_id, r.request.id): r for r in live}
    if args.data_dir:
        from .._approvals._audit import recorded
        from .._ids import DataLayout

        layout = DataLayout.at(Path(args.data_dir))
        kept, more = recorded(layout, tree=args.workflow)
        for record in kept:
            found.setdefault((record.request.workflow_id, record.request.id), record)
        if more:
            say(
                f"lw-temporal: {more} older recorded decisions are not listed (the newest "
                f"{len(kept)} are); narrow it with --workflow",
                err=True,
            )
    return sorted(found.values(), key=lambda r: r.decided_at)


def _decide_handler(approve: bool) -> Handler:
    verb = "approve" if approve else "deny"

    async def handler(args: argparse.Namespace) -> int:
        from .._approvals._client import decide

        try:
            client = await connect(args)
            record = await decide(
                client,
                args.workflow_id,
                args.request_id,
                approve=approve,
                by=args.by,
                why=args.why,
            )
        except Exception as err:
            return failed(f"approvals {verb}", err)
        then = "the call runs now" if approve else "the agent is told why"
        say(
            f"{args.workflow_id}  {record.request.id}  {record.outcome.value} by "
            f"{_safe(record.by, 80)}; {then}"
        )
        return 0

    return handler
