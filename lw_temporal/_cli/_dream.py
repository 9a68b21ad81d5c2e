"""``lw-temporal dream schedule|pause|resume|trigger|delete|list|show|approve|reject``:
dreaming from a terminal.

Every verb talks to the Temporal server (``--address``); a dream is addressed by its
workflow ID, so several proposals for one target are reviewed independently, and a
Schedule by its definition (or ``--schedule-id``). ``schedule`` creates the Schedule or
brings it up to date, so running it again is safe.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import time
from datetime import timedelta

from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    WorkflowQueryFailedError,
)
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from .._ids import (
    PLANNER_WORKFLOW,
    SEARCH_ATTRIBUTE_DEFINITION,
    InvalidWorkflowId,
    parse_workflow_id,
)
from ._common import (
    USAGE,
    CliError,
    Commands,
    Handler,
    add_connection,
    failed,
    load_object,
    operator,
    parse_duration,
    say,
    then_exit,
)
from ._connect import connect
from ._keys import add_keys

#: Seconds ``schedule --now`` and ``trigger`` wait for the Schedule to start the dream.
STARTED_WITHIN = 10.0


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
    schedule.add_argument("--schedule-id", default=None, help="default: lw-dream-<definition>")
    schedule.add_argument("--now", action="store_true", help="also start one dream immediately")
    schedule.add_argument(
        "--definitions",
        default=None,
        help="module:attribute naming the workers' definitions, to check DEFINITION against "
        "(without it: against the definitions of runs the server knows)",
    )
    schedule.add_argument(
        "--force", action="store_true", help="schedule even a definition no check can find"
    )
    add_connection(schedule)
    add_keys(schedule)
    schedule.set_defaults(handler=then_exit(_schedule))

    for verb, help_text in (
        ("pause", "pause a definition's dreaming Schedule (no dream starts until resume)"),
        ("resume", "resume a paused dreaming Schedule"),
        ("trigger", "start one dream of a definition now, through its Schedule"),
        ("delete", "delete a definition's dreaming Schedule (its dreams are kept)"),
    ):
        control = verbs.add_parser(verb, help=help_text, description=help_text + ".")
        control.add_argument(
            "definition", nargs="?", default=None, help="the definition the Schedule dreams of"
        )
        control.add_argument("--schedule-id", default=None, help="default: lw-dream-<definition>")
        if verb in ("pause", "resume"):
            control.add_argument("--note", default=None, help="why (kept on the Schedule)")
        add_connection(control)
        control.set_defaults(handler=then_exit(_control_handler(verb)))

    listing = verbs.add_parser("list", help="dreams waiting for review (or all with --all)")
    listing.add_argument(
        "--all", action="store_true", help="include closed dreams (failed ones with why)"
    )
    listing.add_argument(
        "--task-queue", default=None, help="only the dreams that run on this task queue"
    )
    add_connection(listing)
    add_keys(listing)
    listing.set_defaults(handler=then_exit(_list))

    show = verbs.add_parser(
        "show",
        help="a dream's proposal: a unified diff per file and its source runs",
        description=(
            "A waiting dream's proposal as its worker renders it. A decided or closed dream: "
            "its decision and files, and with --data-dir the diff, read from the data dir."
        ),
    )
    show.add_argument("workflow_id", help="the dream's workflow id (see dream list)")
    show.add_argument(
        "--max-bytes", type=int, default=256 * 1024, help="cut the diff after this many bytes"
    )
    show.add_argument(
        "--data-dir", default=None, help="the workers' data dir: the diff of a decided dream"
    )
    show.add_argument(
        "--wait",
        type=parse_duration,
        default=timedelta(minutes=2),
        help="how long to wait for a dream still at work to propose (default 2m)",
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


_INDEX_SETTLE = (0.0, 0.5, 1.0, 2.0)
"""Pauses (seconds) between asks of the server's index before a definition is unknown."""


async def _indexed_definitions(client: Client) -> set[str] | None:
    """Definitions of the runs the server lists: those indexed with ``LwDefinition``,
    and those whose planner's workflow ID names them (workers started without
    ``--search-attributes`` index nothing, yet their planners' IDs carry the
    definition); None where the server cannot tell."""
    key = SearchAttributeKey.for_keyword(SEARCH_ATTRIBUTE_DEFINITION)
    found: set[str] = set()
    try:
        async for execution in client.list_workflows(
            f"{SEARCH_ATTRIBUTE_DEFINITION} IS NOT NULL", limit=1000
        ):
            value = execution.typed_search_attributes.get(key)
            if value:
                found.add(value)
    except RPCError:  # the server has no LwDefinition: the IDs below still tell
        pass
    try:
        async for execution in client.list_workflows(
            f"WorkflowType = '{PLANNER_WORKFLOW}'", limit=1000
        ):
            with contextlib.suppress(InvalidWorkflowId):
                definition = parse_workflow_id(execution.id).definition_id
                if definition:
                    found.add(definition)
    except RPCError:
        return found or None
    return found


async def _known_definition(client: Client, args: argparse.Namespace) -> None:
    """Refuse a definition that cannot be the workers' (a misspelt one would fail every
    period): checked against ``--definitions``, else against the definitions of the runs
    the server lists; where neither can tell, it is accepted."""
    if args.definitions is not None:
        known = sorted(d.id for d in load_object(args.definitions))
        where = f"in {args.definitions}"
    else:
        found: set[str] | None = None
        # The server's index trails a run by a moment: a run that just ended may not be
        # listed yet, so a miss is asked again before it is called a misspelling.
        for wait in _INDEX_SETTLE:
            await asyncio.sleep(wait)
            found = await _indexed_definitions(client)
            if not found or args.definition in found:
                return  # cannot tell, nothing indexed yet (no runs, or workers without
                # --search-attributes), or known
        known = sorted(found or ())
        where = "among the runs this server knows"
    if args.definition in known:
        return
    close = difflib.get_close_matches(args.definition, known, n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else f" (known: {', '.join(known)})"
    raise CliError(
        f"no definition {args.definition!r} {where}{hint} A dream of it would fail every "
        "period; check the spelling, or pass --force to schedule it anyway",
        USAGE,
    )


async def _schedule(args: argparse.Namespace) -> int:
    from ..dreaming._client import dream_schedule_id, schedule_dreaming
    from ..dreaming._records import DreamOptions

    try:
        options = DreamOptions(
            max_runs=args.max_runs,
            batch_size=args.batch_size,
            approval_timeout=args.approval_timeout,
        )
        schedule_id = args.schedule_id or dream_schedule_id(args.definition)
    except ValueError as err:
        raise CliError(str(err), USAGE) from None
    client = await connect(args)
    if not args.force:
        await _known_definition(client, args)
    before = await _started(client.get_schedule_handle(schedule_id))
    try:
        handle = await schedule_dreaming(
            client,
            args.definition,
            every=args.every,
            task_queue=args.task_queue,
            options=options,
            schedule_id=schedule_id,
            trigger_immediately=args.now,
        )
    except Exception as err:
        return failed("dream schedule", err)
    verb = "updated" if before is not None else "created"
    say(
        f"schedule {handle.id} {verb}: lw.Dreaming of {args.definition} every {args.every} "
        f"on task queue {args.task_queue!r}"
    )
    if args.now:
        await _say_started(handle, before or set())
    return 0


async def _started(handle: ScheduleHandle) -> set[str] | None:
    """The workflow IDs the Schedule started lately, or None when there is no Schedule."""
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return None
        raise
    return {
        action.action.workflow_id
        for action in described.info.recent_actions
        if isinstance(action.action, ScheduleActionExecutionStartWorkflow)
    }


async def _say_started(handle: ScheduleHandle, before: set[str]) -> None:
    """Name the dream a trigger started, once the Schedule has started it (bounded)."""
    deadline = time.monotonic() + STARTED_WITHIN
    while time.monotonic() < deadline:
        new = (await _started(handle) or set()) - before
        if new:
            say(f"started {sorted(new)[-1]}")
            return
        await asyncio.sleep(0.2)
    say(f"the Schedule has not started the dream within {STARTED_WITHIN:.0f}s; see dream list")


def _control_handler(verb: str) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from ..dreaming._client import dream_schedule_id

        if args.schedule_id is None and args.definition is None:
            raise CliError(f"dream {verb} needs a DEFINITION or --schedule-id", USAGE)
        try:
            schedule_id = args.schedule_id or dream_schedule_id(args.definition)
        except ValueError as err:
            raise CliError(str(err), USAGE) from None
        client = await connect(args)
        handle = client.get_schedule_handle(schedule_id)
        before = await _started(handle)
        if before is None:
            raise CliError(
                f"no Schedule {schedule_id!r} on {args.address} (namespace {args.namespace}); "
                "create it with lw-temporal dream schedule"
            )
        note = getattr(args, "note", None) or f"{verb}d by {operator()} (lw-temporal)"
        if verb == "pause":
            await handle.pause(note=note)
            say(f"schedule {schedule_id} paused: no dream starts until lw-temporal dream resume")
        elif verb == "resume":
            await handle.unpause(note=note)
            say(f"schedule {schedule_id} resumed")
        elif verb == "trigger":
            await handle.trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL)
            say(f"schedule {schedule_id} triggered")
            await _say_started(handle, before)
        else:
            await handle.delete()
            say(f"schedule {schedule_id} deleted; its dreams so far are kept")
        return 0

    return handler


async def _list(args: argparse.Namespace) -> int:
    from ..dreaming._client import list_dreams

    try:
        client = await connect(args)
        dreams = await list_dreams(client, running_only=not args.all, task_queue=args.task_queue)
    except Exception as err:
        return failed("dream list", err)
    if not dreams:
        say("no dreams" + ("" if args.all else " running"))
    for state in dreams:
        by = "agent" if state.agent else "consolidator"
        say(
            f"{state.workflow_id}  {state.status.value}  target={state.target}  "
            f"runs={state.runs}  changes={state.changes_count}  notes-by={by}"
        )
        if state.failure:
            say(f"    failed: {state.failure}")
        for change in state.changes:
            kind = "new" if change.base_sha256 is None else "changed"
            say(f"    {kind} {state.target}/{change.path} ({change.bytes} bytes)")
        if state.decision is not None:
            why = f": {state.decision.why}" if state.decision.why else ""
            say(f"    decided by {state.decision.who}{why}")
    return 0


def _dream_id(workflow_id: str) -> str:
    """A dream's workflow ID as the reviewer typed it, or a usage error saying what one is."""
    from .._ids import InvalidWorkflowId, Role, parse_workflow_id

    try:
        if parse_workflow_id(workflow_id).role is Role.DREAMING:
            return workflow_id
    except InvalidWorkflowId:
        pass
    raise CliError(
        f"{workflow_id!r} is not a dream's workflow ID (dream_<definition>@<token>; see "
        "lw-temporal dream list)",
        USAGE,
    )


async def _show(args: argparse.Namespace) -> int:
    _dream_id(args.workflow_id)
    from ..dreaming._client import show_dream, wait_for_review

    stores = None
    if args.data_dir is not None:
        from ..memory._stores import MemoryStores
        from ._datadir import data_dir_config

        stores = MemoryStores.for_config(data_dir_config(args.data_dir))
    try:
        client = await connect(args)
        # A dream still collecting or dreaming is waited for, up to --wait.
        with contextlib.suppress(TimeoutError, RPCError, WorkflowQueryFailedError):
            await wait_for_review(client, args.workflow_id, within=args.wait)
        shown = await show_dream(client, args.workflow_id, max_bytes=args.max_bytes, stores=stores)
    except Exception as err:
        return failed("dream show", err)
    say(shown.text, end="")
    if shown.truncated:
        where = f"; the whole diff is {shown.path} on the worker" if shown.path else ""
        say(f"\n(diff cut at {args.max_bytes} bytes{where})")
    return 0


def _decide_handler(verb: str) -> Handler:
    async def handler(args: argparse.Namespace) -> int:
        from ..dreaming._client import approve_dream, reject_dream

        _dream_id(args.workflow_id)
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
            say(f"{args.workflow_id}: {status.value} by {who}; the target is unchanged")
            return 0
        for path in outcome.promoted:
            say(f"promoted {path} (approved by {who})")
        for path in outcome.dropped:
            say(f"dropped {path} (not in --only)")
        for conflict in outcome.conflicts:
            say(f"conflict: {conflict}", err=True)
        if outcome.conflicts and not outcome.promoted:
            say(
                f"{args.workflow_id}: nothing promoted; the dream still waits for a decision",
                err=True,
            )
        return 1 if outcome.conflicts else 0

    return handler
