"""Every cell of DESIGN section 3's mount table, derived from the workflow ID alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from lw_temporal import MemoryConfig, WorkflowDefinition
from lw_temporal._definitions import DefinitionRegistry
from lw_temporal._scope import Scope, derive_scope
from lw_temporal.ids import DataLayout, InvalidWorkflowId

ROOT = Path("/srv/lw")
LAYOUT = DataLayout.at(ROOT)


def registry(review: MemoryConfig | None = None) -> DefinitionRegistry:
    return DefinitionRegistry(
        [
            WorkflowDefinition(id="candidate-review", memory=review or MemoryConfig()),
            WorkflowDefinition(
                id="candidate-scoring",
                memory=MemoryConfig(attach=[{"id": "candidate-review"}]),
            ),
        ]
    )


def view(scope: Scope) -> dict[str, tuple[str, str]]:
    return {str(m.virtual): (str(m.real.relative_to(ROOT)), m.mode.value) for m in scope.mounts}


ORCH = "pipeline_p"
PLANNER = "pipeline_p/sub-runs/run_candidate-review@1"
WORKER = "pipeline_p/sub-runs/run_candidate-review@1/steps/step_2"
SOLO_PLANNER = "run_candidate-review@1"
SOLO_WORKER = "run_candidate-review@1/steps/step_2"


def scope(workflow_id: str, workflow_type: str, reg: DefinitionRegistry | None = None) -> Scope:
    return derive_scope(workflow_id, workflow_type, reg or registry(), LAYOUT)


def test_orchestrator_view() -> None:
    reg = registry()
    key = reg.pipeline_key
    assert view(scope(ORCH, "lw.Orchestrator", reg)) == {
        "/mnt/memory/pipeline": (f"memory/pipelines/{key}", "rw"),
        "/mnt/memory/org": ("memory/org", "ro"),
        "/mnt/memory/available-workflows/candidate-review": (
            "memory/workflows/candidate-review",
            "ro",
        ),
        "/mnt/memory/available-workflows/candidate-scoring": (
            "memory/workflows/candidate-scoring",
            "ro",
        ),
        "/mnt/scratch/own": ("runs/pipeline_p/scratch", "rw"),
    }


def test_planner_in_a_pipeline_view_with_defaults() -> None:
    reg = registry()
    assert view(scope(PLANNER, "lw.Planner", reg)) == {
        "/mnt/memory/workflow": ("memory/workflows/candidate-review", "rw"),
        "/mnt/memory/pipeline": (f"memory/pipelines/{reg.pipeline_key}", "ro"),
        "/mnt/memory/org": ("memory/org", "ro"),
        "/mnt/scratch/own": ("runs/pipeline_p/sub-runs/run_candidate-review@1/scratch", "rw"),
        "/mnt/scratch/from-orchestrator": ("runs/pipeline_p/scratch", "ro"),
    }


def test_worker_in_a_pipeline_view_with_defaults() -> None:
    reg = registry()
    assert view(scope(WORKER, "lw.Worker", reg)) == {
        "/mnt/memory/workflow": ("memory/workflows/candidate-review", "ro"),
        "/mnt/memory/pipeline": (f"memory/pipelines/{reg.pipeline_key}", "ro"),
        "/mnt/memory/org": ("memory/org", "ro"),
        "/mnt/scratch/own": (
            "runs/pipeline_p/sub-runs/run_candidate-review@1/steps/step_2/scratch",
            "rw",
        ),
        "/mnt/scratch/from-orchestrator": ("runs/pipeline_p/scratch", "ro"),
        "/mnt/scratch/from-planner": (
            "runs/pipeline_p/sub-runs/run_candidate-review@1/scratch",
            "ro",
        ),
    }


def test_single_workflow_run_has_no_pipeline_or_orchestrator_mounts() -> None:
    assert view(scope(SOLO_PLANNER, "lw.Planner")) == {
        "/mnt/memory/workflow": ("memory/workflows/candidate-review", "rw"),
        "/mnt/memory/org": ("memory/org", "ro"),
        "/mnt/scratch/own": ("runs/run_candidate-review@1/scratch", "rw"),
    }
    assert view(scope(SOLO_WORKER, "lw.Worker")) == {
        "/mnt/memory/workflow": ("memory/workflows/candidate-review", "ro"),
        "/mnt/memory/org": ("memory/org", "ro"),
        "/mnt/scratch/own": ("runs/run_candidate-review@1/steps/step_2/scratch", "rw"),
        "/mnt/scratch/from-planner": ("runs/run_candidate-review@1/scratch", "ro"),
    }


@pytest.mark.parametrize(
    ("workflow", "org", "planner_expect", "worker_expect"),
    [
        ("rw", "ro", {"workflow": "rw", "org": "ro"}, {"workflow": "ro", "org": "ro"}),
        ("ro", "rw", {"workflow": "ro", "org": "rw"}, {"workflow": "ro", "org": "ro"}),
        ("none", "none", {}, {}),
        ("none", "rw", {"org": "rw"}, {"org": "ro"}),
        ("rw", "none", {"workflow": "rw"}, {"workflow": "ro"}),
    ],
)
def test_memory_config_sets_planner_modes_and_workers_only_read(
    workflow: str, org: str, planner_expect: dict[str, str], worker_expect: dict[str, str]
) -> None:
    reg = registry(MemoryConfig(workflow=workflow, org=org))

    def memory_modes(s: Scope) -> dict[str, str]:
        return {
            m.virtual.name: m.mode.value
            for m in s.mounts
            if m.virtual.parent.name == "memory" and m.virtual.name in ("workflow", "org")
        }

    assert memory_modes(scope(SOLO_PLANNER, "lw.Planner", reg)) == planner_expect
    assert memory_modes(scope(SOLO_WORKER, "lw.Worker", reg)) == worker_expect


@pytest.mark.parametrize(
    ("workflow_id", "workflow_type"),
    [
        ("pipeline_p/sub-runs/run_candidate-scoring@1", "lw.Planner"),
        ("pipeline_p/sub-runs/run_candidate-scoring@1/steps/step_1", "lw.Worker"),
    ],
)
def test_attached_peers_are_read_only_for_planner_and_worker(
    workflow_id: str, workflow_type: str
) -> None:
    mounts = view(scope(workflow_id, workflow_type))
    assert mounts["/mnt/memory/peer-workflows/candidate-review"] == (
        "memory/workflows/candidate-review",
        "ro",
    )
    assert mounts["/mnt/memory/workflow"][0] == "memory/workflows/candidate-scoring"


def test_available_and_peer_and_from_planner_appear_only_for_their_roles() -> None:
    orch = view(scope(ORCH, "lw.Orchestrator"))
    planner = view(scope(PLANNER, "lw.Planner"))
    worker = view(scope(WORKER, "lw.Worker"))
    assert not any("available-workflows" in k for k in planner | worker)
    assert not any("peer-workflows" in k for k in orch)
    assert "/mnt/memory/workflow" not in orch
    assert "/mnt/scratch/from-planner" not in orch | planner
    assert "/mnt/scratch/from-orchestrator" not in orch


def test_nothing_downward_or_sibling_is_visible() -> None:
    reg = registry()
    step2 = scope(WORKER, "lw.Worker", reg)
    reals = {m.real for m in step2.mounts}
    sibling = LAYOUT.runs / "pipeline_p/sub-runs/run_candidate-review@1/steps/step_3/scratch"
    other_run = LAYOUT.runs / "pipeline_p/sub-runs/run_candidate-scoring@1/scratch"
    assert sibling not in reals and other_run not in reals
    orch_reals = [m.real for m in scope(ORCH, "lw.Orchestrator", reg).mounts]
    assert not any(LAYOUT.runs / "pipeline_p/sub-runs" in (r, *r.parents) for r in orch_reals)


def test_mount_description_lists_every_mount_with_its_mode() -> None:
    s = scope("pipeline_p/sub-runs/run_candidate-scoring@1", "lw.Planner")
    text = s.describe()
    assert text.startswith("Memory mounts (filesystem; read with bash):")
    assert "Scratch mounts (ephemeral, this run only):" in text
    for mount in s.mounts:
        line = next(line for line in text.splitlines() if line.startswith(f"- {mount.virtual}/ "))
        assert f"({mount.mode.value})" in line and line.split(" — ")[1]


def test_scope_refuses_a_wrong_role_and_an_unknown_definition() -> None:
    with pytest.raises(InvalidWorkflowId):
        scope(WORKER, "lw.Planner")
    with pytest.raises(KeyError, match="not registered"):
        scope("run_invoice-processing@1", "lw.Planner")


def test_mount_lookup_finds_the_deepest_mount() -> None:
    s = scope(ORCH, "lw.Orchestrator")
    mount = s.mount_at("/mnt/memory/available-workflows/candidate-review/a/b.md")
    assert mount is not None and mount.real == LAYOUT.workflow_memory("candidate-review")
    assert s.mount_at("/mnt/memory") is None
    assert s.to_real("/mnt/scratch/own/x/y") == LAYOUT.scratch(s.agent_id) / "x" / "y"
