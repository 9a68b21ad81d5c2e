"""``lw-temporal network log``: every connection attempt of the agents' commands.

Reads the egress audit of a data dir (its runs root: ``.lw/egress/``) directly, no
server needed; one line per attempt, oldest first, naming the host (the records are
written by the worker's egress proxy, see :mod:`lw_temporal._egress._audit`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import Commands

_HELP = """\
One line per connection attempt of the agents' commands, oldest first: time, workflow,
command, kind (http: a request through the proxy; connect: a tunnel; direct: a
connection that bypassed the proxy, refused), host:port, decision (allowed, refused,
failed: allowed but unreachable), the address connected to, bytes sent and received,
seconds, and why. --data-dir is the runs root (the data dir unless runs live apart).
"""


def add_network(sub: Commands) -> None:
    network = sub.add_parser(
        "network",
        help="what the agents' commands reached on the network (the egress audit)",
    )
    verbs = network.add_subparsers(dest="network_command", required=True)
    log = verbs.add_parser(
        "log",
        help="every connection attempt, one line each",
        description=_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    log.add_argument("--data-dir", required=True, help="the data dir (or the runs root)")
    log.add_argument("--workflow", default=None, help="only this agent's workflow ID")
    log.add_argument(
        "--summaries", action="store_true", help="also print each command's summary line"
    )
    log.set_defaults(handler=_log)


async def _log(args: argparse.Namespace) -> int:
    from .._egress import records
    from .._ids import DataLayout, InvalidWorkflowId, parse_workflow_id

    if args.workflow is not None:
        try:
            parse_workflow_id(args.workflow)
        except InvalidWorkflowId as err:
            print(f"lw-temporal: --workflow: {err}", file=sys.stderr)
            return 2
    layout = DataLayout.at(args.data_dir)
    if not layout.root.is_dir():
        print(f"lw-temporal: {args.data_dir} is not a folder", file=sys.stderr)
        return 2
    shown = 0
    for record in records(layout.local_state, args.workflow):
        if record.get("kind") == "command" and not args.summaries:
            continue
        print(line(record))
        shown += 1
    if not shown:
        where = f" of {args.workflow}" if args.workflow else ""
        print(
            f"lw-temporal: no connection attempts{where} recorded under {args.data_dir}",
            file=sys.stderr,
        )
    return 0


def _text(value: Any) -> str:
    """A field as a terminal may show it (agent-chosen text is escaped)."""
    text = str(value)
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)[:300]


def line(record: dict[str, Any]) -> str:
    """One attempt (or a command's summary) as the log prints it."""
    head = f"{_text(record.get('time', '?'))}  {_text(record.get('workflow_id', '?'))}"
    head += f"  {_text(record.get('command', '?'))}"
    if record.get("kind") == "command":
        return (
            f"{head}  command  attempts={record.get('attempts', 0)} "
            f"allowed={record.get('allowed', 0)} refused={record.get('refused', 0)} "
            f"sent={record.get('bytes_sent', 0)} received={record.get('bytes_received', 0)}"
            + (f" unlogged={record['log_omitted']}" if record.get("log_omitted") else "")
        )
    host = f"{_text(record.get('host', ''))}:{record.get('port', 0)}"
    text = f"{head}  {_text(record.get('kind', '?'))}  {host}  {_text(record.get('decision', '?'))}"
    if record.get("address"):
        text += f"  address={_text(record['address'])}"
    text += (
        f"  sent={record.get('bytes_sent', 0)} received={record.get('bytes_received', 0)}"
        f"  {record.get('seconds', 0)}s"
    )
    if record.get("reason"):
        text += f"  {_text(record['reason'])}"
    return text
