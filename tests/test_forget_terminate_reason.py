"""``forget --terminate`` leaves no text of the erasure request in the history it
terminates: the terminate reason is kept in the clear (no key covers it) after the
tree's key is shredded, so ``--why``, which may name the person asking, goes to the
forget audit line only."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, secret_definition


async def test_the_why_of_a_forget_stays_out_of_the_history(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    model = ScriptedModel(
        {
            (definition.id, Role.PLANNER): [
                [tool("bash", command="echo started > /mnt/scratch/own/mark; sleep 300")],
                [tool("finish", summary="never")],
            ]
        }
    )
    run = f"run_{definition.id}@{uuid.uuid4().hex[:6]}"
    mark = data_dir / "runs" / run / "scratch" / "mark"
    why = f"erasure request of {PLANTED}"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.start_workflow(
            "lw.Planner", AgentInput(task="wait"), id=run, task_queue=task_queue
        )
        for _ in range(600):
            if mark.exists():
                break
            await asyncio.sleep(0.1)
        assert mark.exists()
        code, out, err = await cli(
            dev_env, "forget", run, "--data-dir", str(data_dir), "--by", "dpo", "--why", why,
            "--terminate",
        )  # fmt: skip
        assert code == 0, out + err

    history = await dev_env.client.get_workflow_handle(run).fetch_history()
    [terminated] = [
        e.workflow_execution_terminated_event_attributes
        for e in history.events
        if e.HasField("workflow_execution_terminated_event_attributes")
    ]
    assert terminated.reason.startswith("lw-temporal forget by dpo")
    for event in history.events:
        assert PLANTED.encode() not in event.SerializeToString(), event
    [line] = (data_dir / ".lw" / "audit" / "forget.jsonl").read_text().splitlines()
    assert json.loads(line)["why"] == why
