"""``forget`` refuses a tree that is still running, erasing nothing, and says how to go
on; with ``--terminate`` it terminates the tree's running workflows first, then erases."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import secret_definition


async def test_a_running_tree_is_refused_unless_terminated(
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
    scratch = data_dir / "runs" / run / "scratch"
    key = data_dir / ".lw" / "keys" / f"{run}.key"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        handle = await client.start_workflow(
            "lw.Planner", AgentInput(task="wait"), id=run, task_queue=task_queue
        )
        for _ in range(600):
            if (scratch / "mark").exists():
                break
            await asyncio.sleep(0.1)
        assert (scratch / "mark").exists()

        args = ("forget", run, "--data-dir", str(data_dir), "--by", "dpo", "--why", "request")
        code, out, err = await cli(dev_env, *args)
        assert code == 1, out + err
        assert f"run tree {run} is still running ({run})" in err
        assert "--terminate" in err and "nothing was erased" in err
        assert key.exists() and scratch.is_dir()
        assert not (data_dir / ".lw" / "audit" / "forget.jsonl").exists()

        code, out, err = await cli(dev_env, *args, "--terminate")
        assert code == 0, out + err
        assert f"terminated {run}" in out
        assert (await handle.describe()).status is WorkflowExecutionStatus.TERMINATED
        assert not key.exists() and not (data_dir / "runs" / run).exists()
