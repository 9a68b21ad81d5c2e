"""A child started by a tainted run is tainted: an orchestrator whose task is marked
untrusted holds its pipeline write, and the planner it starts (whose own input says
nothing of taint) is tainted through its parent, its workflow write held too; its
manifest names the parent. A sibling tree started by the same worker is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentInput, AgentResult, Role, WorkflowDefinition
from lw_temporal.ids import AgentId, DataLayout, pipeline_key
from lw_temporal.memory import MemoryStores, StoreKind, StoreRef
from lw_temporal.testing import ScriptedModel, tool

from ._hierarchy_support import lw_worker
from ._taint_support import WF, cli, command_planner

NOTES = WorkflowDefinition(id="notes")
STORE = StoreRef(StoreKind.WORKFLOW, "notes")
PLAN = f"echo from-child >> {WF}/lessons.md"


def _model() -> ScriptedModel:
    planner = command_planner("notes").scripts
    orchestrator = [
        [tool("bash", command="echo from-orchestrator >> /mnt/memory/pipeline/plan.md")],
        [tool("plan_workflow", workflow="notes", task=PLAN)],
        [tool("finish", summary="done")],
    ]
    return ScriptedModel({**planner, (None, Role.ORCHESTRATOR): orchestrator})


async def test_a_tainted_orchestrators_child_is_tainted(
    dev_env: WorkflowEnvironment,
    data_dir: Path,
    task_queue: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stores = MemoryStores(DataLayout.at(data_dir))
    tainted, clean = (AgentId.orchestrator(f"{task_queue}-{n}") for n in ("bad", "good"))
    async with lw_worker(dev_env, data_dir, task_queue, [NOTES], _model()) as client:
        for run, untrusted in ((tainted, True), (clean, False)):
            await client.execute_workflow(
                "lw.Orchestrator", AgentInput(task="plan it", untrusted=untrusted),
                id=str(run), task_queue=task_queue, result_type=AgentResult,
            )  # fmt: skip
    child = str(tainted.sub_run("notes", "1"))
    held = {(r.workflow_id, r.store) for r in stores.quarantined()}
    pipeline = str(StoreRef(StoreKind.PIPELINE, pipeline_key([NOTES])))
    assert held == {(str(tainted), pipeline), (child, str(STORE))}

    code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir), child)
    assert code == 0
    assert f"started under tainted run {tainted}" in out, out
    # The clean tree's writes went straight to the stores.
    assert stores.read(STORE, "lessons.md").content == "from-child\n"
    clean_child = str(clean.sub_run("notes", "1"))
    code, out, _ = await cli(capsys, "memory", "manifest", "--data-dir", str(data_dir),
                             clean_child)  # fmt: skip
    assert code == 0 and "not tainted" in out
