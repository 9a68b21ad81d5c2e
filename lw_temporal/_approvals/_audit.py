"""The run's bookkeeping of its approvals: ``lw.approvals.record`` writes each decided
request, with who decided and why, to ``.lw/approvals/<workflow id>/<request id>.json``
on the memory root (beside the stores' audit logs, which no agent sees), and the
review page and ``approvals list --all --data-dir`` read them back.

The workflow a record belongs to is the calling activity's own (``activity.info()``,
confirmed by the server as an lw run this deployment runs), never a field of the
request, and a retried write rewrites the same file with the same bytes, so a record
is written once however often Temporal retries it. ``forget`` of a tree removes its
records (they hold the commands its agents wrote).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationError
from temporalio import activity

from .._config import LwConfig
from .._ids import DataLayout, InvalidWorkflowId, parse_workflow_id
from .._privacy._forget import Erasure, add_eraser
from .._privacy._places import approval_records
from ..errors._kinds import INVALID_REQUEST, lw_error
from ..memory._fs import write_atomic
from ._records import RECORD_ACTIVITY, ApprovalRecord, RecordRequest, RecordResult

#: Records one listing reads at most: the newest written (by the files' times); the
#: count of the rest is reported.
READ_LIMIT = 2000


def record_path(layout: DataLayout, workflow_id: str, request_id: str) -> Path:
    segments = parse_workflow_id(workflow_id).segments
    return approval_records(layout).joinpath(*segments, f"{request_id}.json")


class ApprovalActivities:
    """Holds the worker's configuration; registers ``lw.approvals.record``."""

    def __init__(self, config: LwConfig) -> None:
        self.config = config

    @property
    def callables(self) -> tuple[Callable[..., object], ...]:
        return (self.record,)

    @activity.defn(name=RECORD_ACTIVITY)
    async def record(self, request: RecordRequest) -> RecordResult:
        # The server confirms the caller first (``_callers``): a workflow of another
        # worker named like lw's could otherwise write a decision "by carol" into a
        # real run's audit, which the review page and approvals list show.
        scope = self.config.caller_scope()
        await self.config.callers.verify(scope.agent_id)
        workflow_id = scope.workflow_id
        if request.request.workflow_id != workflow_id or (
            request.record is not None and request.record.request.id != request.request.id
        ):
            raise lw_error(
                INVALID_REQUEST,
                f"lw.approvals.record: a record of {request.request.workflow_id!r} sent by "
                f"{workflow_id!r}; a run records only its own approvals",
            )
        try:
            path = record_path(self.config.layout, workflow_id, request.request.id)
        except InvalidWorkflowId as err:
            raise lw_error(INVALID_REQUEST, f"lw.approvals.record: {err}") from None
        data = request.model_dump_json(indent=1).encode() + b"\n"
        write_atomic(path, data)
        return RecordResult(path=str(path.relative_to(self.config.layout.root)))


def recorded(layout: DataLayout, *, tree: str | None = None) -> tuple[list[ApprovalRecord], int]:
    """The decided requests recorded on this data dir (of one tree, or all), oldest
    decision first: the newest READ_LIMIT files written; and how many more there were.
    (Read in the order of their paths, a listing past the limit left out the newest
    decisions of every run whose ID sorts late.)"""
    root = approval_records(layout)
    if tree is not None:
        root = root.joinpath(*parse_workflow_id(tree).segments)
    found: list[ApprovalRecord] = []
    files = sorted(_json_files(root), reverse=True)
    more = max(len(files) - READ_LIMIT, 0)
    for _, path in files[:READ_LIMIT]:
        try:
            kept = RecordRequest.model_validate(json.loads(path.read_bytes()))
        except (OSError, ValueError, ValidationError):
            continue
        if kept.record is not None:
            found.append(kept.record)
    found.sort(key=lambda r: r.decided_at)
    return found, more


def _json_files(root: Path) -> Iterator[tuple[int, Path]]:
    """Each record file under ``root`` with its modification time."""
    if not root.is_dir():
        return
    for path in root.rglob("*.json"):
        try:
            found = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            yield found.st_mtime_ns, path


@add_eraser
def _forget_records(erasure: Erasure) -> None:
    """the tree's approval records"""
    folder = approval_records(erasure.layout).joinpath(*erasure.tree.segments)
    erasure.remove_folder("approval records", folder)
