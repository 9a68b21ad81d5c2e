"""``approvals list --all --data-dir`` past its read limit lists the newest decisions and
says how many older ones it left out.

The recorded decisions were read in the order of their paths and the first
``READ_LIMIT`` kept: on a data dir with more, the newest decisions of every run whose ID
sorts late were silently missing from the listing (and from the review page's table of
the newest). With ``READ_LIMIT + 5`` records, the newest of which belongs to a run that
sorts last, that decision is listed and the listing says 5 older ones are not.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import Role
from lw_temporal._approvals import ApprovalRecord, ApprovalRequest, Outcome
from lw_temporal._approvals._audit import READ_LIMIT, record_path
from lw_temporal._approvals._records import RecordRequest
from lw_temporal.ids import DataLayout

from ._approvals_support import lw

START = datetime(2026, 1, 1, tzinfo=UTC)


def _write(layout: DataLayout, workflow_id: str, number: int, at: datetime) -> None:
    request = ApprovalRequest(
        id=f"a{number}", workflow_id=workflow_id, role=Role.PLANNER, definition_id="many",
        tool="bash", action="bash", arguments={"command": f"echo {number}"},
        arguments_sha256="0" * 64, turn=0, call_id=f"c{number}", rule="bash",
        requested_at=at, deadline=at + timedelta(hours=1),
    )  # fmt: skip
    record = ApprovalRecord(request=request, outcome=Outcome.APPROVED, by="carol", decided_at=at)
    path = record_path(layout, workflow_id, request.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RecordRequest(request=request, record=record).model_dump_json())
    stamp = at.timestamp()
    os.utime(path, (stamp, stamp))


async def test_the_newest_decisions_are_listed_and_the_rest_counted(
    dev_env: WorkflowEnvironment, data_dir: Path
) -> None:
    layout = DataLayout.at(data_dir)
    for n in range(READ_LIMIT + 4):
        _write(layout, "run_many@aa", n + 1, START + timedelta(seconds=n))
    newest = START + timedelta(days=1)
    _write(layout, "run_many@zz", 1, newest)
    code, out, err = await lw(dev_env, "approvals", "list", "--all", "--data-dir", str(data_dir))
    assert code == 0, err
    mine = [line for line in out.splitlines() if line.startswith("run_many@")]
    assert len(mine) == READ_LIMIT, len(mine)
    assert mine[-1].startswith("run_many@zz  a1  bash"), mine[-1]
    assert "lw-temporal: 5 older recorded decisions are not listed" in err, err
