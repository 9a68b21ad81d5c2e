"""``forget --memory revert`` leaves no copy of what it took back in the store's
journal. The journal's records hold each change's bytes (base64) until the store's
next checkpoint, and a revert made new records but kept the old ones, so the tree's
text stayed readable in ``journal.log`` without the report naming it. Each store with a
revert is now checkpointed afterwards."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, Role
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, encodings, secret_definition


async def test_revert_leaves_nothing_of_the_tree_in_the_journal(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    write = tool("memory_write", path="/mnt/memory/workflow/people.md", content=PLANTED)
    model = ScriptedModel(
        {(definition.id, Role.PLANNER): [[write], [tool("finish", summary="ok")]]}
    )
    run = f"run_{definition.id}@one"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.execute_workflow("lw.Planner", AgentInput(task="t"), id=run,
                                      task_queue=task_queue)  # fmt: skip
    journal = data_dir / ".lw" / "stores" / "workflow" / definition.id / "journal.log"
    assert any(e in journal.read_bytes() for e in encodings(PLANTED)), "a test that can fail"

    code, out, err = await cli(
        dev_env, "forget", run, "--data-dir", str(data_dir), "--by", "dpo", "--why", "request",
        "--memory", "revert",
    )  # fmt: skip
    assert code == 0, out + err
    assert f"memory reverted workflow:{definition.id}:people.md" in out
    assert not (data_dir / "memory" / "workflows" / definition.id / "people.md").exists()
    left = journal.read_bytes() if journal.exists() else b""
    assert not any(e in left for e in encodings(PLANTED)), left[:400]
