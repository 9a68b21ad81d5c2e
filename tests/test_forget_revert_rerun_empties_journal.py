"""``forget --memory revert`` stopped after its restores and before it emptied the
journal is finished by running it again: the second run finds the file already as it
was before the tree, counts it reverted and empties the journal, whose records still
held what the tree wrote. Before, the forgetter's own restore read as "changed after
the tree by admin dpo", nothing counted as reverted, and the tree's text stayed in
``journal.log`` however often forget ran."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, LittleWorkflowPlugin, Role
from lw_temporal.memory import Provenance, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._cli_support import cli
from ._hierarchy_support import lw_worker
from ._privacy_support import PLANTED, encodings, secret_definition


async def test_a_second_revert_finishes_what_a_stopped_one_left(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    definition = secret_definition()
    store = StoreRef(StoreKind.WORKFLOW, definition.id)
    plugin = LittleWorkflowPlugin(data_dir, [definition])
    plugin.memory.write(store, "people.md", b"before\n", provenance=Provenance.admin("seed"))
    write = tool("memory_write", path="/mnt/memory/workflow/people.md", content=PLANTED)
    model = ScriptedModel(
        {(definition.id, Role.PLANNER): [[write], [tool("finish", summary="ok")]]}
    )
    run = f"run_{definition.id}@one"
    async with lw_worker(dev_env, data_dir, task_queue, [definition], model) as client:
        await client.execute_workflow("lw.Planner", AgentInput(task="t"), id=run,
                                      task_queue=task_queue)  # fmt: skip
    # The first forget's restore, as it made it, and then it stopped.
    [before] = [e.sha256_before for e in plugin.memory.audit(store) if e.workflow_id == run]
    assert before is not None
    plugin.memory.restore(store, "people.md", before, provenance=Provenance.admin("dpo"))
    journal = data_dir / ".lw" / "stores" / "workflow" / definition.id / "journal.log"
    assert any(e in journal.read_bytes() for e in encodings(PLANTED)), "a test that can fail"

    code, out, err = await cli(
        dev_env, "forget", run, "--data-dir", str(data_dir), "--by", "dpo", "--why", "request",
        "--memory", "revert",
    )  # fmt: skip
    assert code == 0, out + err
    assert f"memory reverted workflow:{definition.id}:people.md" in out, out
    assert "already as before the tree" in out, out
    assert plugin.memory.read(store, "people.md").content == "before\n"
    left = journal.read_bytes() if journal.exists() else b""
    assert not any(e in left for e in encodings(PLANTED)), left[:400]
