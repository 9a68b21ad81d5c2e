"""The mount's mode decides what an activity may change: org memory only with
org "rw", peers and available workflows never, workers never their workflow memory,
and nothing outside the memory mounts at all."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AttachSpec, LittleWorkflowPlugin, MemoryConfig, WorkflowDefinition
from lw_temporal.memory import Provenance, StoreKind, StoreRef

from ._memory_support import call, memory_harness


def _definitions() -> list[WorkflowDefinition]:
    return [
        WorkflowDefinition(id="review"),
        WorkflowDefinition(
            id="scoring", memory=MemoryConfig(attach=(AttachSpec(id="review"),), org="rw")
        ),
    ]


async def test_modes_come_from_the_scope(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str
) -> None:
    plugin = LittleWorkflowPlugin(data_dir, _definitions())
    review = StoreRef(StoreKind.WORKFLOW, "review")
    org = StoreRef(StoreKind.ORG, "org")
    plugin.memory.write(review, "lessons.md", b"peer lesson\n", provenance=Provenance.admin("t"))
    plugin.memory.write(org, "policy.md", b"be kind\n", provenance=Provenance.admin("t"))
    tq = task_queue
    async with memory_harness(dev_env, plugin, task_queue) as run:
        review_planner = await run(
            f"run_review@{tq}",
            call("lw.memory.write", path="/mnt/memory/org/policy.md", content="poison"),
            call("lw.memory.read", path="/mnt/memory/org/policy.md"),
            call("lw.memory.write", path="/mnt/scratch/own/x.md", content="x"),
            call("lw.memory.read", path="/etc/passwd"),
            call("lw.memory.read", path="/mnt/memory/peer-workflows/scoring/x.md"),
        )
        scoring_planner = await run(
            f"run_scoring@{tq}",
            call("lw.memory.read", path="/mnt/memory/peer-workflows/review/lessons.md"),
            call("lw.memory.append", path="/mnt/memory/peer-workflows/review/lessons.md",
                 content="poison"),
            call("lw.memory.delete", path="/mnt/memory/peer-workflows/review/lessons.md"),
            call("lw.memory.append", path="/mnt/memory/org/policy.md", content="be brief\n"),
        )  # fmt: skip
        worker = await run(
            f"run_review@{tq}/steps/step_1",
            call("lw.memory.read", path="/mnt/memory/workflow/lessons.md"),
            call("lw.memory.write", path="/mnt/memory/workflow/lessons.md", content="poison"),
            role="worker",
        )
        orchestrator = await run(
            f"pipeline_{tq}",
            call("lw.memory.read", path="/mnt/memory/available-workflows/review/lessons.md"),
            call("lw.memory.replace",
                 path="/mnt/memory/available-workflows/review/lessons.md",
                 old="peer", new="bad"),
            call("lw.memory.write", path="/mnt/memory/pipeline/plan.md", content="plan"),
            call("lw.memory.write", path="/mnt/memory/org/policy.md", content="poison"),
            role="orchestrator",
        )  # fmt: skip

    assert review_planner[0].error_type == "LwMemoryReadOnly"
    assert "memory.org='rw'" in (review_planner[0].message or "")
    assert f"run_review@{tq}" in (review_planner[0].message or "")
    assert review_planner[1].ok and review_planner[1].result["content"] == "be kind\n"
    assert review_planner[2].error_type == "LwMemoryOutsideScope"
    assert review_planner[3].error_type == "LwMemoryOutsideScope"
    assert review_planner[4].error_type == "LwMemoryOutsideScope"

    assert scoring_planner[0].result["content"] == "peer lesson\n"
    assert scoring_planner[1].error_type == "LwMemoryReadOnly"
    assert scoring_planner[2].error_type == "LwMemoryReadOnly"
    assert scoring_planner[3].ok, scoring_planner[3].message

    assert worker[0].result["content"] == "peer lesson\n"
    assert worker[1].error_type == "LwMemoryReadOnly"

    assert orchestrator[0].result["content"] == "peer lesson\n"
    assert orchestrator[1].error_type == "LwMemoryReadOnly"
    assert orchestrator[2].ok, orchestrator[2].message
    assert orchestrator[3].error_type == "LwMemoryReadOnly"

    assert (data_dir / "memory/workflows/review/lessons.md").read_text() == "peer lesson\n"
    assert (data_dir / "memory/org/policy.md").read_text() == "be kind\nbe brief\n"
    key = plugin.config.definitions.pipeline_key
    assert (data_dir / "memory/pipelines" / key / "plan.md").read_text() == "plan"
    # only the allowed mutations reached the audit logs
    assert [e.op for e in plugin.memory.audit(review)] == ["write"]
    org_audit = plugin.memory.audit(org)
    assert [(e.op, e.workflow_id) for e in org_audit] == [
        ("write", None),
        ("append", f"run_scoring@{tq}"),
    ]
