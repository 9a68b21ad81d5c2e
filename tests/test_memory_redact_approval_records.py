"""``memory redact`` scrubs the records of approval requests too: a decided request's
record (``.lw/approvals/...``) keeps the call's arguments, so a memory write that
waited for a person kept the text it wrote there. The final sweep named the record as
"not a place the agents' runs write; remove or edit it by hand"; it is now scrubbed
string by string like the runs' other files, says so in the report, and stays a
record ``approvals list --all`` reads."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult, ApprovalRule, Role, WorkflowDefinition
from lw_temporal._approvals._audit import recorded
from lw_temporal._approvals._client import decide, list_approvals
from lw_temporal.ids import DataLayout
from lw_temporal.testing import ScriptedModel, running_worker, tool

from ._privacy_support import PLANTED


async def test_redact_scrubs_an_approval_record_of_the_write(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = WorkflowDefinition(
        id=f"asked-{uuid.uuid4().hex[:8]}",
        approvals=(ApprovalRule(tool="memory_write", store="workflow"),),
    )
    write = tool("memory_write", path="/mnt/memory/workflow/people.md", content=f"{PLANTED}\n")
    model = ScriptedModel(
        {(definition.id, Role.PLANNER): [[write], [tool("finish", summary="ok")]]}
    )
    workflow_id = f"run_{definition.id}@1"
    async with running_worker(
        dev_env.client, data_dir=data_dir, definitions=[definition], model=model,
        task_queue=task_queue,
    ) as client:  # fmt: skip
        handle = await client.start_workflow(
            "lw.Planner", "note", id=workflow_id, task_queue=task_queue, result_type=AgentResult
        )
        for _ in range(600):
            pending = (await list_approvals(client, workflow_id=workflow_id)).pending
            if pending:
                break
            await asyncio.sleep(0.1)
        await decide(client, workflow_id, pending[0].id, approve=True, by="carol")
        await handle.result()
    layout = DataLayout.at(data_dir)
    records = list((layout.state / "approvals").rglob("*.json"))
    assert records and all(PLANTED.encode() in p.read_bytes() for p in records)

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lw_temporal._cli", "memory", "redact",
        "--data-dir", str(data_dir), "--by", "dpo",
        f"workflow:{definition.id}", "people.md", PLANTED,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    raw_out, raw_err = await asyncio.wait_for(process.communicate(), 300)
    out = raw_out.decode()
    assert process.returncode == 0, out + raw_err.decode()
    for path in records:
        assert PLANTED.encode() not in path.read_bytes(), path
        shown = path.relative_to(data_dir).as_posix()
        assert f"changed  approval records {shown}" in out, out
    assert "remove or edit it by hand" not in out, out
    kept, _ = recorded(layout, tree=workflow_id)
    assert [r.by for r in kept] == ["carol"]
    assert kept[0].request.arguments["content"] == "[REDACTED]\n"
